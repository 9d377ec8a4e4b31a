"""Reading the judge prompts of `cg-ray explain` in scripted models: batched (a numbered list of examples, a
JSON list back) or single (one text, one yes / no back)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

_EXAMPLE = re.compile(r'^Example \d+: "(.*)"$', re.MULTILINE)

Rule = Callable[[str, str, str], bool]  # (kind, description, text) -> yes?


@dataclass(frozen=True)
class JudgePrompt:
    kind: str  # detection | fuzzing
    description: str
    texts: list[str]
    batched: bool


def read_judge_prompt(prompt: str) -> JudgePrompt | None:
    """The judge prompt's kind, description and examples; None for an explanation or theme prompt."""
    m = re.search(r'described as: "(.*?)"\n', prompt)
    if m is None:
        return None
    kind = "fuzzing" if "marked with [[" in prompt else "detection"
    texts = _EXAMPLE.findall(prompt)
    if texts:
        return JudgePrompt(kind, m.group(1), texts, True)
    one = re.search(r'Text: "(.*)"', prompt, re.DOTALL)
    assert one is not None, prompt
    return JudgePrompt(kind, m.group(1), [one.group(1)], False)


def marked_words(text: str) -> str:
    return " ".join(re.findall(r"\[\[(.*?)\]\]", text))


def answer(prompt: str, rule: Rule) -> str:
    """A list of yes / no for a batch, a leading "Yes" or a JSON "no" for a single example (as real models
    mix them)."""
    p = read_judge_prompt(prompt)
    assert p is not None, prompt
    said = [rule(p.kind, p.description, t) for t in p.texts]
    if p.batched:
        return "Answers: " + json.dumps(["yes" if s else "no" for s in said])
    return "Yes, it is." if said[0] else '{"answer": "no"}'
