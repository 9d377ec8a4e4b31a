"""Batched judging with a held-out score, for concepts and failure modes alike.

Detection and fuzzing put `judge_batch` examples (default 5, as Delphi's scorers) into one prompt, shuffled
so that a batch mixes the classes, and read a JSON list of yes / no back (`prompts.parse_answers`). A batch
whose answer is not such a list is judged again one example per request (the single-example prompts); the
share of batches read as lists is the parse rate. An endpoint judge is asked for a structured answer
(`response_format` json_schema: exactly n yes / no) unless `judge_structured` is off; a small model that
cannot write a list on its own then always does (`structured` in the stats says whether it was used).
`--max-requests` caps what is sent: a plan over it is refused before the first request, and a fallback that
would pass it is not sent (its examples count as unreadable).

Every candidate description is judged on one half of the held-out rows (`select`); the winner — chosen by
the caller's rule from those scores — is judged again on the other half (`report`), and that is the score
reported: the best of several candidates on the rows it was chosen on is optimistic.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.prompts import (
    balanced_accuracy,
    batch_prompt,
    detect_prompt,
    fuzz_prompt,
    parse_answers,
    parse_judgement,
)
from cg_ray.errors import ConfigError
from cg_ray.generation.base import estimated_tokens
from cg_ray.generation.completer import Completer, StructuredCompleter

log = logging.getLogger(__name__)

Kind = Literal["detection", "fuzzing"]


@dataclass(frozen=True)
class Task:
    """One candidate's examples of one score, with their true labels."""

    kind: Kind
    description: str
    texts: list[str]
    labels: list[bool]
    seed: tuple[int, ...]


@dataclass(frozen=True)
class Examples:
    """Held-out examples of a subject: detection (with / without it) and fuzzing (right / wrong marking)."""

    positive: list[str] = field(default_factory=list)
    negative: list[str] = field(default_factory=list)
    right: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)

    def tasks(self, description: str, seed: tuple[int, ...]) -> list[Task]:
        """Only scores that can be had: detection needs rows of both classes (balanced accuracy); without held-out
        rows of the concept its prompts were sent and gave no score (160 of 1,160 on the demo's default run)."""
        out = []
        if self.positive and self.negative:
            out.append(Task("detection", description, self.positive + self.negative, self.labels(0), (*seed, 0)))
        if self.right and self.wrong:
            out.append(Task("fuzzing", description, self.right + self.wrong, self.labels(1), (*seed, 1)))
        return out

    @property
    def size(self) -> int:
        return len(self.positive) + len(self.negative) + (len(self.right) + len(self.wrong) if self.right else 0)

    def labels(self, which: int) -> list[bool]:
        pos, neg = (self.positive, self.negative) if which == 0 else (self.right, self.wrong)
        return [True] * len(pos) + [False] * len(neg)


@dataclass
class Scores:
    detection: float | None = None
    fuzzing: float | None = None
    n_positive: int = 0
    n_negative: int = 0
    n_fuzz: int = 0
    n_unparsed: int = 0
    first_answer: str | None = None


@dataclass
class JudgeStats:
    batches: int = 0  # prompts of several examples sent
    parsed: int = 0  # of those, answered with a readable list
    fallback_requests: int = 0  # single-example requests for the batches that were not
    skipped: int = 0  # examples not judged: their fallback would have passed --max-requests
    requests: int = 0  # every judge request sent
    structured: str = "off"  # used | refused (by the server, then judged without) | off (not asked)

    def as_dict(self) -> dict[str, Any]:
        rate = None if not self.batches else round(self.parsed / self.batches, 4)
        return {**self.__dict__, "parse_rate": rate}


class Budget:
    """The chat requests `--max-requests` allows; None: no cap."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.used = limit, 0

    def take(self, n: int) -> int:
        allowed = n if self.limit is None else max(0, min(n, self.limit - self.used))
        self.used += allowed
        return allowed

    def check(self, planned: int) -> None:
        """Refuse a plan over the cap; what is left of it goes to fallbacks."""
        self.used = planned
        if self.limit is not None and planned > self.limit:
            raise ConfigError(
                f"the plan needs {planned:,} requests, over --max-requests {self.limit:,}: narrow it "
                "(--concepts, --top, --n-detect, --no-fuzz) or raise the cap"
            )


def answer_tokens(config: ExplainConfig, n: int) -> int:
    """Room for a list of `n` answers (a fenced JSON list included)."""
    return config.detect_tokens + 4 * n


def answer_format(n: int) -> dict[str, Any]:
    """The `response_format` of a judgement of `n` examples: {"answers": [n × "yes" | "no"]}, or {"answer": …}
    for one (the shapes the prompts ask for; an object at the top, as strict OpenAI schemas require)."""
    yes_no = {"type": "string", "enum": ["yes", "no"]}
    key, value = (
        ("answer", yes_no) if n == 1 else ("answers", {"type": "array", "items": yes_no, "minItems": n, "maxItems": n})
    )
    schema = {"type": "object", "properties": {key: value}, "required": [key], "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "judgements", "schema": schema, "strict": True}}


def ask(
    completer: Completer, prompts: Sequence[str], max_tokens: int, sizes: Sequence[int], stats: JudgeStats
) -> list[str]:
    """The answers, structured (`answer_format` per prompt of `sizes` examples) when the completer can."""
    if not (isinstance(completer, StructuredCompleter) and completer.structured):
        return completer.complete(prompts, max_tokens)
    answers = completer.complete(prompts, max_tokens, [answer_format(n) for n in sizes])
    stats.structured = "used" if completer.structured and stats.structured != "refused" else "refused"
    return answers


def batches_of(task: Task, k: int) -> list[list[int]]:
    """The task's examples, shuffled (seeded) so a batch mixes the classes, in batches of at most `k`."""
    order = np.random.default_rng(list(task.seed)).permutation(len(task.texts)).tolist()
    return [order[i : i + k] for i in range(0, len(order), k)]


def n_requests(tasks: Sequence[Task], k: int) -> int:
    return sum(math.ceil(len(t.texts) / k) for t in tasks)


def request_prompt(task: Task, batch: Sequence[int]) -> str:
    """The judge prompt of one batch of a task's examples: a list prompt, or the single prompt for one."""
    if len(batch) > 1:
        return batch_prompt(task.kind, task.description, [task.texts[j] for j in batch])
    return single_prompt(task, batch[0])


def prompt_tokens(tasks: Sequence[Task], k: int, count: Callable[[str], int]) -> int:
    """Prompt tokens of the judge requests of `tasks` (`count`: a prompt's tokens), as `judge` batches them."""
    return sum(count(request_prompt(t, b)) for t in tasks for b in batches_of(t, k))


def judge(
    tasks: Sequence[Task], completer: Completer, config: ExplainConfig, budget: Budget, stats: JudgeStats
) -> tuple[list[list[bool | None]], list[list[str]]]:
    """Every task's answers (True / False / None = unreadable) in its examples' order, and the raw answers."""
    k = config.judge_batch
    plan = [(t, b) for t in range(len(tasks)) for b in batches_of(tasks[t], k)]
    prompts = [request_prompt(tasks[t], b) for t, b in plan]
    answers = ask(completer, prompts, answer_tokens(config, k), [len(b) for _, b in plan], stats)
    stats.requests += len(prompts)
    out: list[list[bool | None]] = [[None] * len(t.texts) for t in tasks]
    raw: list[list[str]] = [[] for _ in tasks]
    again: list[tuple[int, int]] = []
    for (t, b), answer in zip(plan, answers, strict=True):
        raw[t].append(answer)
        if len(b) == 1:
            out[t][b[0]] = parse_judgement(answer)
            continue
        stats.batches += 1
        got = parse_answers(answer, len(b))
        if got is None:
            again += [(t, j) for j in b]
            continue
        stats.parsed += 1
        for j, v in zip(b, got, strict=True):
            out[t][j] = v
    if again:
        allowed = budget.take(len(again))
        if allowed < len(again):
            log.warning("%d examples left unjudged: their fallback would pass --max-requests", len(again) - allowed)
            stats.skipped += len(again) - allowed
        sent = again[:allowed]
        singles = ask(
            completer, [single_prompt(tasks[t], j) for t, j in sent], config.detect_tokens, [1] * len(sent), stats
        )
        stats.fallback_requests += len(sent)
        stats.requests += len(sent)
        for (t, j), answer in zip(sent, singles, strict=True):
            out[t][j] = parse_judgement(answer)
    return out, raw


def single_prompt(task: Task, j: int) -> str:
    return (detect_prompt if task.kind == "detection" else fuzz_prompt)(task.description, task.texts[j])


@dataclass(frozen=True)
class Subject:
    """A concept or a failure mode: its candidate descriptions and its held-out examples, split in two."""

    key: tuple[int, ...]
    candidates: list[str]
    select: Examples
    report: Examples
    sources: list[str]  # llm | label | terms | …, one per candidate


Pick = Callable[[Subject, list[Scores]], int | None]  # the winning candidate from its select-half scores


def scores_of(tasks: Sequence[Task], votes: Sequence[list[bool | None]], raw: Sequence[list[str]]) -> Scores:
    s = Scores()
    for task, v, answers in zip(tasks, votes, raw, strict=True):
        pos = [x for x, label in zip(v, task.labels, strict=True) if label]
        neg = [x for x, label in zip(v, task.labels, strict=True) if not label]
        score = balanced_accuracy(pos, neg)
        if task.kind == "detection":
            s.detection, s.n_positive, s.n_negative = score, len(pos), len(neg)
            s.first_answer = answers[0] if answers else None
        else:
            s.fuzzing, s.n_fuzz = score, len(v)
        s.n_unparsed += sum(1 for x in v if x is None)
    return s


def _score(
    jobs: Sequence[tuple[Subject, int, Examples]], completer: Completer, config: ExplainConfig, budget: Budget,
    stats: JudgeStats,
) -> list[Scores]:  # fmt: skip
    tasks = [ex.tasks(s.candidates[i], (*s.key, i)) for s, i, ex in jobs]
    flat = [t for ts in tasks for t in ts]
    votes, raw = judge(flat, completer, config, budget, stats)
    out, at = [], 0
    for ts in tasks:
        out.append(scores_of(ts, votes[at : at + len(ts)], raw[at : at + len(ts)]))
        at += len(ts)
    return out


def score_subjects(
    subjects: Sequence[Subject], completer: Completer, config: ExplainConfig, budget: Budget, pick: Pick,
    stats: JudgeStats,
) -> tuple[list[list[Scores]], list[tuple[int, Scores] | None]]:  # fmt: skip
    """Every candidate judged on the select half; the winner (by `pick`) on the report half."""
    jobs = [(s, i, s.select) for s in subjects for i in range(len(s.candidates))]
    flat = _score(jobs, completer, config, budget, stats)
    selected: list[list[Scores]] = []
    at = 0
    for s in subjects:
        selected.append(flat[at : at + len(s.candidates)])
        at += len(s.candidates)
    winners = [pick(s, sc) if s.candidates else None for s, sc in zip(subjects, selected, strict=True)]
    second = [(s, w, s.report) for s, w in zip(subjects, winners, strict=True) if w is not None]
    held = iter(_score(second, completer, config, budget, stats))
    heldout = [None if w is None else (w, next(held)) for w in winners]
    return selected, heldout


def planned(
    subjects: Sequence[Subject], config: ExplainConfig, count: Callable[[str], int] = estimated_tokens
) -> tuple[int, int, int]:
    """(judge requests, their prompt tokens by `count`, their completion tokens at most) before any fallback."""
    k = config.judge_batch
    tasks = [t for s in subjects for i, d in enumerate(s.candidates) for t in s.select.tasks(d, (*s.key, i))]
    tasks += [t for s in subjects if s.candidates for t in s.report.tasks(s.candidates[0], (*s.key, 0))]
    n = n_requests(tasks, k)
    return n, prompt_tokens(tasks, k, count), n * answer_tokens(config, k)


def halves(rows: Sequence[int], seed: Sequence[int]) -> tuple[list[int], list[int]]:
    """A seeded split of held-out rows into the select half and the report half."""
    order = np.random.default_rng(list(seed)).permutation(len(rows)).tolist()
    mid = (len(rows) + 1) // 2
    return sorted(rows[i] for i in order[:mid]), sorted(rows[i] for i in order[mid:])
