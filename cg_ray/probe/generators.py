"""Item generators: who writes a gap's target / control pairs. `ItemGenerator` is what the probe calls;
`LLMGenerator` asks a chat model (the completers of `cg-ray explain`: an OpenAI-compatible endpoint or the
generation backend) and `families.FamilyGenerator` draws them offline.

The LLM is asked for one minimal pair per request, as JSON (a JSON-schema `response_format` where the
completer takes one, as the judge of `cg-ray explain` is), with short exact answers of the form the gap's
scorer reads. Each request names a variant (seed, index), so a greedy endpoint writes different pairs. An
answer is read strictly: a ```json fence may be stripped, nothing else; anything but the JSON asked for is
counted as malformed and dropped. A reference is then checked: computed where the question is plain
arithmetic (ast, a few operators), else answered again by the checker (the same model, or another) from a
plainly worded prompt and scored against the reference with the gap's scorer; a pair either side of which
fails is counted as a wrong reference and dropped. Requests short of `n_pairs` usable pairs are followed by
more, up to `overdraw` × `n_pairs` requests. The evaluated model is never asked.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.judging import Completer, StructuredCompleter
from cg_ray.describe.prompts import one_line
from cg_ray.probe.items import Gap, GenerationOutcome, ItemPair
from cg_ray.scoring import score_one

# answer: computed where the question is plain arithmetic, else answered again by the checker; executed: only
# computed (no extra requests; the others pass unchecked); none: no check.
ReferenceCheck = Literal["answer", "executed", "none"]


@runtime_checkable
class ItemGenerator(Protocol):
    """Writes `n_pairs` target / control pairs for a gap; the same (gap, n_pairs, seed) gives the same pairs
    (for an LLM: given the same answers)."""

    name: str

    def generate(self, gap: Gap, n_pairs: int, seed: int) -> GenerationOutcome: ...


PAIR_TEMPLATE = """You write test questions that probe a weakness of a language model. The questions it fails \
are described as: "{description}"{terms}

Questions of its test suite that show this:
{examples}

Write one NEW minimal pair of questions (variant {variant}: make it unlike other variants).
- "target": a question that has this property, of the same task and format as the examples.
- "control": the same question changed as little as possible so that it no longer has the property, with the \
same task, format and difficulty.
Give each a short exact reference "answer": {rule}.
Answer only with JSON: {{"target": {{"question": "...", "answer": "..."}}, "control": {{"question": "...", \
"answer": "..."}}}}"""

CHECK_TEMPLATE = """Answer this question. The answer is {rule}. Reply with the answer only.{attempt}

Question: {question}"""

RULES = {  # how the gap's scorer reads an answer (cg_ray/scoring/scorers.py)
    "numeric": "a number only, without units or words",
    "multiple_choice": "one letter: the question lists its options as (A), (B), (C) …",
}
DEFAULT_RULE = "a few words at most, written exactly as the right answer is"
USABLE_SCORERS = ("numeric", "exact", "multiple_choice", "any_of")  # those that score against a reference
N_EXAMPLES, EXAMPLE_CHARS, N_TERMS = 3, 300, 8
PAIR_TOKENS, CHECK_TOKENS = 400, 48


def scorer_for(gap: Gap) -> str:
    """The gap's scorer where it scores against a reference ("numeric+exact": a probe benchmark mixes them;
    the first), else exact."""
    return next((s for s in gap.scorer.split("+") if s in USABLE_SCORERS), "exact")


def pair_prompt(gap: Gap, scorer: str, variant: str, index: int) -> str:
    """The request for one pair; the examples shown rotate with `index`."""
    shown = [gap.examples[(index + j) % len(gap.examples)] for j in range(min(N_EXAMPLES, len(gap.examples)))]
    examples = "\n".join(f"{j + 1}. {one_line(e)[:EXAMPLE_CHARS]}" for j, e in enumerate(shown)) or "(none kept)"
    terms = ", ".join(f"“{t}”" for t in gap.terms[:N_TERMS])
    return PAIR_TEMPLATE.format(
        description=one_line(gap.description),
        terms=f"\nWords and phrases these questions share: {terms}" if terms else "",
        examples=examples,
        variant=variant,
        rule=RULES.get(scorer, DEFAULT_RULE),
    )


def check_prompt(question: str, scorer: str, attempt: int) -> str:
    return CHECK_TEMPLATE.format(
        rule=RULES.get(scorer, DEFAULT_RULE), attempt=f" (attempt {attempt + 1})" if attempt else "", question=question
    )


class Side(BaseModel):
    # A bare number is taken as its text: the schema asks for a string, a model may still write 47.
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, coerce_numbers_to_str=True)

    question: str = Field(min_length=3, max_length=2000)
    answer: str = Field(min_length=1, max_length=200)


class PairAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: Side
    control: Side


def pair_format() -> dict[str, Any]:
    """The `response_format` of a pair (an object at the top, every field required: strict OpenAI schemas)."""
    text = {"type": "string"}
    side = {
        "type": "object",
        "properties": {"question": text, "answer": text},
        "required": ["question", "answer"],
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "properties": {"target": side, "control": side},
        "required": ["target", "control"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "item_pair", "schema": schema, "strict": True}}


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


Answer = TypeVar("Answer", bound=BaseModel)


def parse_json(text: str, model: type[Answer]) -> Answer | None:
    """`model` read from an answer that is exactly the JSON asked for (a ```json fence aside); None otherwise."""
    body = text.strip()
    fenced = _FENCE.match(body)
    try:
        return model.model_validate_json(fenced.group(1) if fenced else body)
    except ValidationError:
        return None


def parse_pair(text: str) -> PairAnswer | None:
    """The pair of an answer that is exactly the JSON asked for (a ```json fence aside); None otherwise, and
    for a "pair" whose two questions are the same."""
    pair = parse_json(text, PairAnswer)
    return None if pair is None or pair.target.question == pair.control.question else pair


_OPS: dict[type[ast.AST], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_ARITHMETIC = re.compile(r"^(?:what is|compute|calculate|evaluate)\s+([-+*/×÷().\d\s]+?)\s*[?=.]?$", re.IGNORECASE)
MAX_EXPRESSION_CHARS = 80


def _value(node: ast.AST) -> Fraction:
    # Numbers and + - * / only: nothing else of the question is ever run.
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _value(node.operand)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError("not plain arithmetic")


def computed_answer(question: str) -> str | None:
    """The value of a question whose first sentence is plain arithmetic ("What is 12 + 35? Answer with the
    number only."); None for any other question."""
    first = re.split(r"(?<=[?.!])\s+", question.strip(), maxsplit=1)[0]
    found = _ARITHMETIC.match(first)
    if found is None or len(found.group(1)) > MAX_EXPRESSION_CHARS:
        return None
    try:
        value = _value(ast.parse(found.group(1).replace("×", "*").replace("÷", "/"), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None
    return str(value.numerator) if value.denominator == 1 else str(float(value))


def completer_name(completer: object) -> str:
    """ "endpoint:MODEL" or "backend:MODEL" for the project's completers (their `config`)."""
    config = getattr(completer, "config", None)
    if isinstance(config, ExplainConfig):
        return f"{'endpoint' if config.endpoint else 'backend'}:{config.model}"
    return f"llm:{type(completer).__name__}"


def ask(completer: Completer, prompts: Sequence[str], max_tokens: int, fmt: dict[str, Any] | None) -> list[str]:
    """The answers, constrained to `fmt` where the completer can (`StructuredCompleter` while it holds)."""
    if fmt is not None and isinstance(completer, StructuredCompleter) and completer.structured:
        return completer.complete(prompts, max_tokens, [fmt] * len(prompts))
    return completer.complete(prompts, max_tokens)


class LLMGenerator:
    """Pairs written by a chat model, their references checked (module docstring). `checker`: who answers the
    questions again for the check (default: the same completer)."""

    def __init__(
        self,
        completer: Completer,
        *,
        checker: Completer | None = None,
        reference_check: ReferenceCheck = "answer",
        check_samples: int = 1,
        overdraw: float = 1.5,
        structured: bool = True,
        name: str | None = None,
    ) -> None:
        if check_samples < 1 or overdraw < 1:
            raise ValueError("check_samples and overdraw must be at least 1")
        self.completer, self.checker = completer, checker or completer
        self.reference_check, self.check_samples, self.overdraw = reference_check, check_samples, overdraw
        self.structured = structured
        self.name = name or completer_name(completer)

    @classmethod
    def from_config(cls, config: ExplainConfig, **kw: Any) -> LLMGenerator:
        """The explainer of `config` writes; its judge (when set apart, `judge_*`) checks."""
        from cg_ray.describe.completers import make_completer

        checker = make_completer(config.judge(), role="checker") if config.separate_judge else None
        return cls(make_completer(config, role="generator"), checker=checker, **kw)

    def close(self) -> None:
        from cg_ray.describe.completers import close

        close(*{id(c): c for c in (self.completer, self.checker)}.values())

    def generate(self, gap: Gap, n_pairs: int, seed: int) -> GenerationOutcome:
        out, scorer = GenerationOutcome(), scorer_for(gap)
        budget = math.ceil(n_pairs * self.overdraw)
        kept: list[tuple[int, PairAnswer]] = []  # (request index, pair)
        while len(kept) < n_pairs and out.requests < budget:
            batch = range(out.requests, min(budget, out.requests + n_pairs - len(kept)))
            prompts = [pair_prompt(gap, scorer, f"{seed}-{i}", i) for i in batch]
            parsed = [
                (i, parse_pair(a))
                for i, a in zip(batch, ask(self.completer, prompts, PAIR_TOKENS, self._fmt), strict=True)
            ]
            out.requests += len(batch)
            readable = [(i, p) for i, p in parsed if p is not None]
            out.malformed += len(parsed) - len(readable)
            right = self.checked([p for _, p in readable], scorer)
            out.wrong_reference += right.count(False)
            kept += [ip for ip, ok in zip(readable, right, strict=True) if ok]
        out.pairs = [self._item(gap, seed, scorer, index, i, p) for index, (i, p) in enumerate(kept)]
        if out.requests and 3 * len(kept) < out.requests:
            out.note = (
                f"the generator could not express this gap: {len(kept)} of {out.requests} requests gave a usable "
                f"pair ({out.malformed} malformed, {out.wrong_reference} with a wrong reference)"
            )
        return out

    @property
    def _fmt(self) -> dict[str, Any] | None:
        return pair_format() if self.structured else None

    def _item(self, gap: Gap, seed: int, scorer: str, index: int, request: int, p: PairAnswer) -> ItemPair:
        return ItemPair(
            gap_id=gap.gap_id, pair_id=f"{gap.gap_id}/{index}", generator=self.name,
            request_id=f"{gap.gap_id}/request-{request}", seed=seed, target_prompt=p.target.question,
            target_reference=p.target.answer, control_prompt=p.control.question, control_reference=p.control.answer,
            scorer=scorer,
        )  # fmt: skip

    def checked(self, pairs: Sequence[PairAnswer], scorer: str) -> list[bool]:
        """Whether both references of each pair pass the check (`reference_check`)."""
        right = self.checked_sides([s for p in pairs for s in (p.target, p.control)], scorer)
        return [right[2 * k] and right[2 * k + 1] for k in range(len(pairs))]

    def checked_sides(self, sides: Sequence[Side], scorer: str) -> list[bool]:
        """Whether each question's reference passes the check (`reference_check`): single items too
        (`cg-ray augment`)."""
        if self.reference_check == "none":
            return [True] * len(sides)
        verdicts: list[bool | None] = [None] * len(sides)
        if scorer == "numeric":  # computed where the question is plain arithmetic: exact, and free
            for j, s in enumerate(sides):
                value = computed_answer(s.question)
                verdicts[j] = None if value is None else score_one("numeric", value, [s.answer]) == 1.0
        if self.reference_check == "answer":
            self._answered(sides, verdicts, scorer)
        return [v is not False for v in verdicts]

    def _answered(self, sides: Sequence[Side], verdicts: list[bool | None], scorer: str) -> None:
        """The checker answers the sides not computed, `check_samples` times each; a majority must score 1."""
        todo = [j for j, v in enumerate(verdicts) if v is None]
        k = self.check_samples
        prompts = [check_prompt(sides[j].question, scorer, a) for j in todo for a in range(k)]
        answers = self.checker.complete(prompts, CHECK_TOKENS) if prompts else []
        for n, j in enumerate(todo):
            agree = sum(score_one(scorer, a, [sides[j].answer]) == 1.0 for a in answers[n * k : (n + 1) * k])
            verdicts[j] = 2 * agree > k
