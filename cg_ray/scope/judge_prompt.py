"""What a scope judge is asked and how its answer is read (`scope.judge` sends it): the prompt, with the
benchmark's stated intent and each concept's label and reference examples; the JSON schema of one verdict
per concept; and the strict reading of an answer (a concept without exactly one readable verdict is null)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, ValidationError

from cg_ray.describe.prompts import one_line

EXAMPLES_SHOWN = 3  # reference texts per concept
EXAMPLE_CHARS = 200  # of each, in the prompt
ANSWER_OVERHEAD_TOKENS = 32  # the answer's braces and keys besides its verdicts
VERDICT_TOKENS = 64  # room for one verdict: the id, the boolean and a one-sentence reason
REASON_CHARS = 400  # a reason is kept up to this long


@dataclass(frozen=True)
class Candidate:
    concept: int
    label: str | None
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    in_scope: bool | None  # None: unreadable
    reason: str | None = None


PROMPT_TEMPLATE = """You are reviewing what an evaluation benchmark for language models covers.

Benchmark: {benchmark}
What the benchmark is meant to test: {description}

A sparse autoencoder found the concepts below inside a language model. Each is common in {reference} but \
rare or absent in this benchmark. For each concept, decide whether it lies within the benchmark's intended \
scope: would a complete version of this benchmark, as described above, need to include inputs that involve \
this concept? Judge by the stated purpose, not by what the benchmark happens to contain now. A concept that \
is merely generic (formatting, common words) or belongs to another task is out of scope.

{concepts}

Give exactly one verdict per concept, using its id; "in_scope" is true or false. Answer only with JSON of this form:
{{"verdicts": [{{"concept": {first}, "in_scope": true, "reason": "one short sentence"}}, ...]}}"""


def concept_block(c: Candidate) -> str:
    label = one_line(c.label) if c.label else "(no description: judge it by the texts)"
    lines = [f'Concept {c.concept}: "{label}"']
    for text in c.examples[:EXAMPLES_SHOWN]:
        lines.append(f'  it fires on: "{one_line(text)[:EXAMPLE_CHARS]}"')
    return "\n".join(lines)


def scope_prompt(benchmark: str, description: str, reference: str, batch: Sequence[Candidate]) -> str:
    return PROMPT_TEMPLATE.format(
        benchmark=benchmark,
        description=one_line(description),
        reference=reference,
        concepts="\n\n".join(concept_block(c) for c in batch),
        first=batch[0].concept,
    )


def verdict_format(concepts: Sequence[int]) -> dict[str, Any]:
    """The `response_format` of a batch: {"verdicts": [one {concept, in_scope, reason} per concept]}, the ids
    limited to the batch's (an object at the top, every field required: strict OpenAI schemas)."""
    item = {
        "type": "object",
        "properties": {
            "concept": {"type": "integer", "enum": [int(c) for c in concepts]},
            "in_scope": {"type": "boolean"},
            "reason": {"type": "string"},
        },
        "required": ["concept", "in_scope", "reason"],
        "additionalProperties": False,
    }
    n = len(concepts)
    verdicts = {"type": "array", "items": item, "minItems": n, "maxItems": n}
    schema = {
        "type": "object",
        "properties": {"verdicts": verdicts},
        "required": ["verdicts"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "scope_verdicts", "schema": schema, "strict": True}}


def answer_tokens(n: int) -> int:
    return ANSWER_OVERHEAD_TOKENS + VERDICT_TOKENS * n


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore")

    concept: StrictInt
    in_scope: StrictBool
    reason: str = ""


_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL | re.IGNORECASE)


def _json_body(text: str) -> object:
    """The answer's JSON: the whole answer, a ```json fence, or the span from its first { / [ to its last } / ]
    (a model's sentence around the JSON); None when none of them is JSON."""
    body = text.strip()
    fenced = _FENCE.search(body)
    tries = [fenced.group(1)] if fenced else []
    tries.append(body)
    spans = [(body.find(o), body.rfind(c)) for o, c in (("{", "}"), ("[", "]"))]
    tries += [body[i : j + 1] for i, j in sorted(spans) if 0 <= i < j]  # the outermost first
    for t in tries:
        try:
            return json.loads(t)
        except json.JSONDecodeError:
            continue
    return None


def parse_verdicts(text: str, concepts: Sequence[int]) -> dict[int, Verdict]:
    """Each asked concept's verdict in an answer, {"verdicts": [...]} or a bare list of the same items.

    A concept answered by no readable item, or by readable items that disagree, is unreadable (absent from
    the result); items about concepts not asked, and items that are not {concept: int, in_scope: bool, ...},
    are ignored."""
    data = _json_body(text)
    items = data.get("verdicts") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return {}
    asked = set(int(c) for c in concepts)
    seen: dict[int, list[Verdict]] = {}
    for raw in items:
        try:
            item = _Item.model_validate(raw)
        except ValidationError:
            continue
        if item.concept not in asked:
            continue
        reason = " ".join(item.reason.split())[:REASON_CHARS] or None
        seen.setdefault(item.concept, []).append(Verdict(item.in_scope, reason))
    return {c: vs[0] for c, vs in seen.items() if len({v.in_scope for v in vs}) == 1}
