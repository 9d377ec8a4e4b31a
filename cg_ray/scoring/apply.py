"""Scoring rows: a Ray Data batch function, per-benchmark stats, and the "nothing parsed" check.

Each row gets ``score`` and ``score_status``: ``precomputed`` (score came with the row), ``scored``,
``unparsed`` (the scorer found no answer: score 0, counted), or ``no_response``. A benchmark whose
scorer parsed none of its answers fails the run: that is a wrong scorer or prompt, not a weak model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final, Required, TypedDict, cast

import pyarrow as pa

from cg_ray.errors import CgRayError
from cg_ray.scoring import SCORERS
from cg_ray.scoring.judge import JUDGE_OUTPUT

if TYPE_CHECKING:
    import ray.data

SCORE_STATUS: Final = "score_status"
STATUSES: Final = ("precomputed", "scored", "unparsed", "no_response")
Options = Mapping[str, Mapping[str, Any]]  # benchmark -> scorer options


class RowToScore(TypedDict, total=False):
    """What `score_row` reads of a normalized row (`cg_ray.benchmarks.rows.BenchmarkRow`, plus `judge_output`
    on judge rows)."""

    row_id: Required[str]
    scorer: Required[str]
    benchmark: str
    score: float | None
    response: str | None
    reference: list[str] | None
    choices: list[str] | None
    judge_output: str | None


# What `stats_from_rows` reads of a scored row (`score_status` is SCORE_STATUS).
class ScoredStatus(TypedDict):
    benchmark: str
    scorer: str
    score_status: str


class ScoringCounts(TypedDict):
    """`BenchmarkScoring.as_dict()`: a benchmark's rows by score status (the run manifest's `scoring`)."""

    benchmark: str
    scorer: str
    rows: int
    precomputed: int
    scored: int
    unparsed: int
    no_response: int


class ScoringError(CgRayError):
    """A benchmark's scorer could not parse any answer."""


def score_row(row: RowToScore, options: Mapping[str, object] | None = None) -> tuple[float | None, str]:
    """``(score, status)`` of one normalized row (with ``response``, and ``judge_output`` for judge rows)."""
    precomputed = row.get("score")
    if precomputed is not None:
        return float(precomputed), "precomputed"
    name = row["scorer"]
    answer = row.get(JUDGE_OUTPUT) if name == "judge" else row.get("response")
    if answer is None:
        return (0.0, "unparsed") if name == "precomputed" else (None, "no_response")
    value = SCORERS.get(name)(answer, list(row.get("reference") or []), row.get("choices"), **(options or {}))
    if value is None:
        return 0.0, "unparsed"
    if not 0.0 <= value <= 1.0:
        raise ScoringError(f"scorer {name!r} returned {value} (outside [0, 1]) for row {row['row_id']!r}")
    return float(value), "scored"


class ScoreBatch:
    """``ds.map_batches(ScoreBatch(options), batch_format="pyarrow")``: adds ``score`` and ``score_status``."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = dict(options or {})

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        results = [score_row(r, self.options.get(r["benchmark"])) for r in rows]
        scores = pa.array([s for s, _ in results], type=pa.float64())
        statuses = pa.array([st for _, st in results], type=pa.string())
        if "score" in batch.column_names:
            batch = batch.set_column(batch.column_names.index("score"), "score", scores)
        else:
            batch = batch.append_column("score", scores)
        if SCORE_STATUS in batch.column_names:
            return batch.set_column(batch.column_names.index(SCORE_STATUS), SCORE_STATUS, statuses)
        return batch.append_column(SCORE_STATUS, statuses)


def score_dataset(ds: ray.data.Dataset, options: Options | None = None, *, batch_size: int = 256) -> ray.data.Dataset:
    """Lazy: the scored dataset. Scoring is cheap CPU work, so plain tasks (no actors)."""
    return ds.map_batches(ScoreBatch(options), batch_format="pyarrow", batch_size=batch_size)


@dataclass
class BenchmarkScoring:
    benchmark: str
    scorer: str
    rows: int = 0
    precomputed: int = 0
    scored: int = 0
    unparsed: int = 0
    no_response: int = 0

    @property
    def parsed(self) -> int:
        return self.precomputed + self.scored

    def as_dict(self) -> ScoringCounts:
        return cast(ScoringCounts, asdict(self))  # asdict of this dataclass: exactly its fields


def stats_from_counts(counts: Iterable[Mapping[str, Any]]) -> dict[str, BenchmarkScoring]:
    """From ``{benchmark, scorer, score_status, count}`` records (e.g. a Ray Data groupby)."""
    stats: dict[str, BenchmarkScoring] = {}
    for rec in counts:
        key = rec["benchmark"]
        entry = stats.setdefault(key, BenchmarkScoring(key, rec["scorer"]))
        if rec["scorer"] not in entry.scorer.split("+"):
            entry.scorer = f"{entry.scorer}+{rec['scorer']}"  # probes mix scorers within a benchmark
        n = int(rec.get("count()", rec.get("count", 0)))
        entry.rows += n
        setattr(entry, rec[SCORE_STATUS], getattr(entry, rec[SCORE_STATUS]) + n)
    return stats


def stats_from_rows(rows: Iterable[ScoredStatus]) -> dict[str, BenchmarkScoring]:
    counts: dict[tuple[str, str, str], int] = {}
    for r in rows:
        key = (r["benchmark"], r["scorer"], r[SCORE_STATUS])
        counts[key] = counts.get(key, 0) + 1
    return stats_from_counts(
        {"benchmark": b, "scorer": s, SCORE_STATUS: st, "count": n} for (b, s, st), n in counts.items()
    )


def dataset_stats(ds: ray.data.Dataset) -> dict[str, BenchmarkScoring]:
    """Per-benchmark counts of a scored dataset (one small groupby; executes the dataset)."""
    return stats_from_counts(ds.groupby(["benchmark", "scorer", SCORE_STATUS]).count().take_all())


def check_parsed(stats: Mapping[str, BenchmarkScoring]) -> None:
    """Fail when a benchmark has responses but its scorer parsed none of them (or rows lack responses)."""
    problems = []
    for s in stats.values():
        if s.no_response:
            problems.append(f"benchmark {s.benchmark!r}: {s.no_response} of {s.rows} rows have no response to score")
        elif s.parsed == 0 and s.unparsed > 0:
            problems.append(
                f"benchmark {s.benchmark!r}: scorer {s.scorer!r} could not parse any of its {s.unparsed} answers "
                "(wrong scorer or prompt format?)"
            )
    if problems:
        raise ScoringError("; ".join(problems))
