"""Items for one in-scope gap, written by a chat model in the benchmark's own format.

One item per request, as JSON (a JSON-schema `response_format` where the completer takes one, as the
probe's pairs are), read strictly (`probe.generators.parse_json`): anything else is counted as malformed.
The prompt shows the concept's label, reference rows where it fires most (what real use looks like) and a
few of the benchmark's own prompts (the format to follow). Each request names a variant (seed, index), so a
greedy endpoint writes different items. Each item is then checked for its format (a reference where the
benchmark's scorer needs one; a multiple-choice answer is a letter of its options) and its reference, by the
probe's check (`LLMGenerator.checked_sides`: computed for plain arithmetic, else answered again by the
checker). Requests short of `items` usable items are followed by more, up to `overdraw` × `items`.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cg_ray.augment.plan import AugmentPlan, Target
from cg_ray.benchmarks.mapping import render_choices
from cg_ray.describe.prompts import one_line
from cg_ray.probe.generators import DEFAULT_RULE, RULES, LLMGenerator, Side, ask, parse_json

ITEM_TEMPLATE = """You write new test items for the benchmark "{benchmark}". Its items rarely show this concept, \
which real use of the same task often shows:
Concept {concept}: "{label}"

Prompts of real use where the concept is strongest:
{examples}

Items of the benchmark (write in exactly this format, task and style):
{rows}

Write one NEW item of this benchmark (variant {variant}: make it unlike other variants) that clearly shows the \
concept. {answer}
Answer only with JSON: {{"prompt": "...", "reference": "...", "choices": [...]}}"""

ANSWER_RULE = (
    'Give its short exact reference answer as "reference": {rule}. "choices": [] unless it is multiple choice.'
)
CHOICE_RULE = (
    'Put its options in "choices" (not in the prompt) and the letter of the right one as "reference" (A, B, ...).'
)
FREE_RULE = '"reference": its reference answer if it has one, else "". "choices": [] unless it is multiple choice.'
N_EXAMPLES, EXAMPLE_CHARS = 3, 300
ITEM_TOKENS = 600


class ItemAnswer(BaseModel):
    # A bare number is taken as its text: the schema asks for a string, a model may still write 47.
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, coerce_numbers_to_str=True)

    prompt: str = Field(max_length=6000)
    reference: str = Field(max_length=300)
    choices: list[str] = Field(max_length=26)


def item_format() -> dict[str, Any]:
    """The `response_format` of an item (strict OpenAI schema: an object, every field required)."""
    text = {"type": "string"}
    schema = {
        "type": "object",
        "properties": {"prompt": text, "reference": text, "choices": {"type": "array", "items": text}},
        "required": ["prompt", "reference", "choices"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "benchmark_item", "schema": schema, "strict": True}}


def item_prompt(plan: AugmentPlan, target: Target, variant: str, index: int) -> str:
    """The request for one item; the reference examples shown rotate with `index`."""
    ex = target.examples
    shown = [ex[(index + j) % len(ex)] for j in range(min(N_EXAMPLES, len(ex)))]
    if plan.scorer == "multiple_choice":
        answer = CHOICE_RULE
    elif plan.needs_reference:
        answer = ANSWER_RULE.format(rule=RULES.get(plan.scorer, DEFAULT_RULE))
    else:
        answer = FREE_RULE
    return ITEM_TEMPLATE.format(
        benchmark=plan.benchmark,
        concept=target.concept_id,
        label=one_line(target.label or "(no label: see the examples)"),
        examples="\n".join(f"{j + 1}. {one_line(e)[:EXAMPLE_CHARS]}" for j, e in enumerate(shown)) or "(none kept)",
        rows="\n".join(f"{j + 1}. {one_line(r)[:EXAMPLE_CHARS]}" for j, r in enumerate(plan.shown))
        or "(the run kept no prompts)",
        variant=variant,
        answer=answer,
    )


def item_text(prompt: str, choices: Sequence[str] | None) -> str:
    """The item as the reader reads it and a harness shows it: the prompt, then its options (A) … (B) …."""
    return f"{prompt}\n{render_choices(list(choices))}" if choices else prompt


@dataclass(frozen=True)
class Item:
    item_id: str  # f"{gap_id}/{index}", unique within an augment
    concept_id: int
    generator: str
    request_id: str
    seed: int
    prompt: str
    reference: str
    choices: list[str] | None
    format_error: str | None  # why its format is wrong (None: right)
    reference_ok: bool | None  # the reference check's verdict (None: not checked)

    @property
    def text(self) -> str:
        return item_text(self.prompt, self.choices)

    @property
    def usable(self) -> bool:
        return self.format_error is None and self.reference_ok is not False


@dataclass
class Written:
    """What the writer produced for one gap: every item read (usable or not) and the answers it could not read."""

    items: list[Item] = field(default_factory=list)
    requests: int = 0
    malformed: int = 0
    generator: str = ""


def format_error(a: ItemAnswer, scorer: str, needs_reference: bool) -> str | None:
    if len(a.prompt) < 3:
        return "no prompt"
    if needs_reference and not a.reference:
        return "no reference answer"
    if scorer == "multiple_choice":
        if len(a.choices) < 2:
            return "fewer than two choices"
        letter = a.reference.strip().strip("()").strip()
        if len(letter) != 1 or letter not in string.ascii_uppercase[: len(a.choices)]:
            return f"reference {a.reference!r} is not the letter of a choice"
    return None


def write_items(plan: AugmentPlan, target: Target, writer: LLMGenerator) -> Written:
    """`plan.config.items` usable items for `target`, at most `overdraw` × as many requests."""
    cfg, out = plan.config, Written(generator=writer.name)
    budget = math.ceil(cfg.items * cfg.overdraw)
    check = plan.needs_reference and cfg.reference_check != "none"
    fmt = item_format() if writer.structured else None
    while sum(i.usable for i in out.items) < cfg.items and out.requests < budget:
        batch = range(out.requests, min(budget, out.requests + cfg.items - sum(i.usable for i in out.items)))
        prompts = [item_prompt(plan, target, f"{cfg.seed}-{i}", i) for i in batch]
        answers = [parse_json(a, ItemAnswer) for a in ask(writer.completer, prompts, ITEM_TOKENS, fmt)]
        out.requests += len(batch)
        out.malformed += sum(a is None for a in answers)
        read = [
            (i, a, format_error(a, plan.scorer, plan.needs_reference))
            for i, a in zip(batch, answers, strict=True)
            if a is not None
        ]
        sides = [Side.model_construct(question=item_text(a.prompt, a.choices), answer=a.reference)
                 for _, a, err in read if err is None]  # fmt: skip
        verdicts = iter(writer.checked_sides(sides, plan.scorer) if check and sides else [])
        for i, a, err in read:
            ok = next(verdicts) if check and err is None else None
            out.items.append(_item(target, len(out.items), writer.name, i, cfg.seed, a, err, ok))
    return out


def _item(target: Target, n: int, who: str, request: int, seed: int, a: ItemAnswer, err: str | None,
          ok: bool | None) -> Item:  # fmt: skip
    return Item(
        item_id=f"{target.gap_id}/{n}", concept_id=target.concept_id, generator=who,
        request_id=f"{target.gap_id}/request-{request}", seed=seed, prompt=a.prompt, reference=a.reference,
        choices=a.choices or None, format_error=err, reference_ok=ok,
    )  # fmt: skip
