"""Every prompt of `cg-ray explain`, and the parsing of the answers (JSON validated with pydantic).

Detection asks whether a held-out text exhibits the described feature; fuzzing (Delphi's second score)
shows a held-out active text with a span marked — its activating span, or as many words elsewhere — and asks
whether the marked words match the description. Both quote the description verbatim.

Small instruct models rarely answer in clean JSON: an explanation that is not JSON is accepted when its
first line is a plausible sentence (recorded as parse="text"); a detection answer that is not JSON is read
from its first "yes" / "no" word, and one with neither is "unparsed" and counts as wrong in the balanced
accuracy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

EXPLAIN_TEMPLATE = """Below are text excerpts where one hidden feature of a language model is active. \
The part where it is most active is marked with [[ and ]].

{examples}

In one short sentence, say what the marked parts have in common (a topic, a kind of task, a word or a \
symbol). Answer only with JSON: {{"description": "..."}}"""

DETECT_TEMPLATE = """A hidden feature of a language model is described as: "{description}"

Text: "{text}"

Is this feature present in the text? Answer only with JSON: {{"answer": "yes"}} or {{"answer": "no"}}"""

FUZZ_TEMPLATE = """A hidden feature of a language model is described as: "{description}"

In the text below, a few words are marked with [[ and ]].

Text: "{text}"

Do the marked words match this feature? Answer only with JSON: {{"answer": "yes"}} or {{"answer": "no"}}"""

DETECT_BATCH_TEMPLATE = """A hidden feature of a language model is described as: "{description}"

{examples}

For each example, is this feature present in the text? Answer only with a JSON list of {n} answers, "yes" or \
"no", one per example in order, e.g. {like}"""

FUZZ_BATCH_TEMPLATE = """A hidden feature of a language model is described as: "{description}"

In each example below, a few words are marked with [[ and ]].

{examples}

For each example, do the marked words match this feature? Answer only with a JSON list of {n} answers, "yes" \
or "no", one per example in order, e.g. {like}"""

MODE_TEMPLATE = """A language model was tested on the texts below. It FAILED on some and PASSED on others of the \
same kind; in each text, the part where the model's hidden features of this group are most active is marked \
with [[ and ]].

{examples}

In one short sentence, say what the FAILED texts share that the PASSED ones do not (a topic, a kind of task, \
a word or a symbol). Answer only with JSON: {{"description": "..."}}"""

THEME_TEMPLATE = """These descriptions belong to hidden features of a language model that are active on the same \
texts:

{descriptions}

Name what they have in common in at most six words. Answer only with JSON: {{"name": "..."}}"""

MAX_TEXT_CHARS = 400


class Explanation(BaseModel):
    description: str = Field(min_length=3, max_length=300)


class ThemeName(BaseModel):
    name: str = Field(min_length=3, max_length=80)


class Judgement(BaseModel):
    answer: Literal["yes", "no"]


def explain_prompt(examples: Sequence[str]) -> str:
    body = "\n".join(f"{i + 1}. {e[:MAX_TEXT_CHARS]}" for i, e in enumerate(examples))
    return EXPLAIN_TEMPLATE.format(examples=body)


def mode_prompt(failed: Sequence[str], passed: Sequence[str]) -> str:
    """The failure mode's failing rows and passing rows of the same metadata cells, labelled and marked."""
    shown = [("FAILED", t) for t in failed] + [("PASSED", t) for t in passed]
    body = "\n".join(f"{i + 1}. {label}: {one_line(t)[:MAX_TEXT_CHARS]}" for i, (label, t) in enumerate(shown))
    return MODE_TEMPLATE.format(examples=body)


def one_line(text: str) -> str:
    """Whitespace collapsed and double quotes made single: one example, one quoted line of the prompt."""
    return " ".join(text.split()).replace('"', "'")


def batch_prompt(kind: Literal["detection", "fuzzing"], description: str, texts: Sequence[str]) -> str:
    """Several examples in one judge prompt, numbered; the answer is a list (Delphi's scorers)."""
    template = DETECT_BATCH_TEMPLATE if kind == "detection" else FUZZ_BATCH_TEMPLATE
    limit = MAX_TEXT_CHARS if kind == "detection" else 2 * MAX_TEXT_CHARS
    examples = "\n".join(f'Example {i + 1}: "{one_line(t)[:limit]}"' for i, t in enumerate(texts))
    like = json.dumps(["yes", "no", "no", "yes", "no", "yes", "no", "no"][: len(texts)] or ["no"])
    return template.format(description=description, examples=examples, n=len(texts), like=like)


_LIST = re.compile(r"\[[^\[\]]*\]", re.DOTALL)
_YES_NO = {"yes": True, "no": False, "1": True, "0": False, "true": True, "false": False}


def parse_answers(text: str, n: int) -> list[bool] | None:
    """The first JSON list of exactly `n` yes / no (or 1 / 0, true / false) answers; None when there is none."""
    for m in _LIST.finditer(text):
        try:
            items = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(items, list) or len(items) != n:
            continue
        got = [_YES_NO.get(str(x).strip().lower()) for x in items]
        if all(g is not None for g in got):
            return [bool(g) for g in got]
    return None


def theme_prompt(descriptions: Sequence[str]) -> str:
    return THEME_TEMPLATE.format(descriptions="\n".join(f"- {d}" for d in descriptions))


def parse_theme_name(text: str) -> str | None:
    for obj in _json_objects(text):
        try:
            return ThemeName.model_validate(obj).name.strip()
        except ValidationError:
            continue
    return None


def detect_prompt(description: str, text: str) -> str:
    return DETECT_TEMPLATE.format(description=description, text=one_line(text)[:MAX_TEXT_CHARS])


def fuzz_prompt(description: str, marked_text: str) -> str:
    """Fuzzing (Delphi): is the marked span an instance of the description? (the description verbatim)"""
    return FUZZ_TEMPLATE.format(description=description, text=one_line(marked_text)[: 2 * MAX_TEXT_CHARS])


_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


def _json_objects(text: str) -> list[object]:
    found = []
    for m in _OBJECT.finditer(text):
        try:
            found.append(json.loads(m.group(0)))
        except json.JSONDecodeError:
            continue
    return found


def parse_explanation(text: str) -> tuple[str | None, Literal["json", "text", "failed"]]:
    for obj in _json_objects(text):
        try:
            return Explanation.model_validate(obj).description.strip(), "json"
        except ValidationError:
            continue
    line = next((ln.strip().strip('"').strip() for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"^(description|answer)\s*:\s*", "", line, flags=re.IGNORECASE).strip('"').strip()
    try:
        return Explanation(description=line).description, "text"
    except ValidationError:
        return None, "failed"


def parse_judgement(text: str) -> bool | None:
    """True (yes), False (no) or None (unparsed)."""
    for obj in _json_objects(text):
        if isinstance(obj, dict) and isinstance(obj.get("answer"), str):
            obj = {"answer": obj["answer"].strip().lower()}
        try:
            return Judgement.model_validate(obj).answer == "yes"
        except ValidationError:
            continue
    word = re.search(r"\b(yes|no)\b", text, flags=re.IGNORECASE)  # the first yes / no anywhere
    return None if word is None else word.group(1).lower() == "yes"


def balanced_accuracy(on_positive: Sequence[bool | None], on_negative: Sequence[bool | None]) -> float | None:
    """(TPR + TNR) / 2 of parsed judgements; an unparsed answer counts as wrong in both classes."""
    if not on_positive or not on_negative:
        return None
    tpr = sum(1 for p in on_positive if p is True) / len(on_positive)
    tnr = sum(1 for p in on_negative if p is False) / len(on_negative)
    return (tpr + tnr) / 2
