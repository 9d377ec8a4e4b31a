"""Seeded synthetic rows.parquet with known structure, for the demo, tests and benchmarks.

Each benchmark draws concepts from a shared Zipf-like popularity plus a topic block of its own; a few
concepts are never drawn (so "missing" exists), and some concepts make the simulated model succeed or
fail more often (so model gaps exist). Generated in chunks, so a million rows stay in bounded memory.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.publish import atomic_file

log = logging.getLogger(__name__)

DEFAULT_BENCHMARKS = ("arithmetic", "letter_counting", "date_math", "unit_conversion", "ordering", "logic")


@dataclass(frozen=True)
class SyntheticSpec:
    benchmarks: tuple[str, ...] = DEFAULT_BENCHMARKS
    rows_per_benchmark: int = 1500
    d_sae: int = 4608
    nnz: int = 32  # concepts drawn per row before de-duplication
    seed: int = 0
    model: str | None = "synthetic-model"
    missing_fraction: float = 0.05  # concepts no benchmark ever activates
    chunk_rows: int = 65_536
    # Rows drawn with another seed from the same plan (None: the plan's seed, the historical stream). A large
    # sample with another row seed estimates the planted population values (coverage tests of intervals).
    row_seed: int | None = None


@dataclass(frozen=True)
class SyntheticPlan:
    """The hidden truth of a synthetic suite: what each benchmark covers and what the model finds hard."""

    probs: np.ndarray  # benchmarks × d_sae draw probabilities
    topics: np.ndarray  # benchmarks × d_sae: concepts a benchmark over-samples
    effect: np.ndarray  # d_sae: log-odds effect of a concept on a correct answer (0 for most)
    base_logit: np.ndarray  # benchmarks

    @classmethod
    def draw(cls, rng: np.random.Generator, spec: SyntheticSpec) -> SyntheticPlan:
        d, n_bench = spec.d_sae, len(spec.benchmarks)
        base = 1.0 / (np.arange(d) + 10.0) ** 1.1
        base = base[rng.permutation(d)]
        base[rng.random(d) < spec.missing_fraction] = 0.0
        topics = rng.random((n_bench, d)) < 0.02
        weights = base * np.where(topics, 25.0, 1.0) * rng.uniform(0.5, 1.5, size=(n_bench, d))
        # ~10% of concepts move the odds of a correct answer (+ easy, − hard).
        effect = np.where(rng.random(d) < 0.1, rng.normal(0.0, 2.0, d), 0.0)
        base_logit = rng.uniform(-0.5, 1.5, n_bench)
        return cls(weights / weights.sum(axis=1, keepdims=True), topics & (base > 0), effect, base_logit)

    def label(self, concept: int, benchmarks: tuple[str, ...]) -> str:
        if self.probs[:, concept].max() == 0:
            parts = ["never drawn"]
        else:
            topic_of = [benchmarks[b] for b in np.flatnonzero(self.topics[:, concept])]
            parts = [f"topic of {', '.join(topic_of)}"] if topic_of else ["background"]
        if self.effect[concept] != 0:
            kind = "easy" if self.effect[concept] > 0 else "hard"
            parts.append(f"planted {kind} ({self.effect[concept]:+.2f} log-odds)")
        return f"synthetic #{concept}: " + "; ".join(parts)


def iter_synthetic_batches(spec: SyntheticSpec) -> Iterator[pa.RecordBatch]:
    rng = np.random.default_rng(spec.seed)
    plan = SyntheticPlan.draw(rng, spec)
    if spec.row_seed is not None:
        rng = np.random.default_rng([spec.seed, spec.row_seed])
    cdfs = np.cumsum(plan.probs, axis=1)
    effect, base_logit = plan.effect, plan.base_logit
    for b, name in enumerate(spec.benchmarks):
        for start in range(0, spec.rows_per_benchmark, spec.chunk_rows):
            n = min(spec.chunk_rows, spec.rows_per_benchmark - start)
            draws = np.searchsorted(cdfs[b], rng.random((n, spec.nnz)) * cdfs[b, -1], side="right")
            draws = np.minimum(draws, spec.d_sae - 1)
            draws.sort(axis=1)
            keep = np.ones_like(draws, dtype=bool)
            keep[:, 1:] = draws[:, 1:] != draws[:, :-1]  # unique ids per row, ascending
            lengths = keep.sum(axis=1)
            ids = draws[keep].astype(np.int32)
            acts = rng.lognormal(mean=-1.0, sigma=1.0, size=ids.size).astype(np.float32)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
            row_of = np.repeat(np.arange(n), lengths)
            logit = base_logit[b] + np.bincount(row_of, weights=effect[ids] * acts, minlength=n)
            scores = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float64)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([f"{name}-{i}" for i in range(start, start + n)], pa.string()),
                    pa.array([name] * n, pa.string()),
                    pa.array([spec.model] * n, pa.string()),
                    pa.array(scores),
                    pa.array(rng.integers(16, 400, n).astype(np.int32)),
                    pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids)),
                    pa.ListArray.from_arrays(pa.array(offsets), pa.array(acts)),
                ],
                schema=S.ROWS_SCHEMA,
            )


def write_synthetic_rows(path: str | Path, spec: SyntheticSpec) -> Path:
    out = Path(path)
    with atomic_file(out) as tmp, pq.ParquetWriter(tmp, S.rows_schema_with_d_sae(spec.d_sae)) as writer:
        for batch in iter_synthetic_batches(spec):
            writer.write_batch(batch)
    return out


def write_synthetic_labels(path: str | Path, spec: SyntheticSpec) -> Path:
    """Labels that state each concept's planted truth, so a run can be checked by eye."""
    plan = SyntheticPlan.draw(np.random.default_rng(spec.seed), spec)
    out = Path(path)
    table = pa.table(
        {
            "concept_id": pa.array(np.arange(spec.d_sae, dtype=np.int32)),
            "label": pa.array([plan.label(c, spec.benchmarks) for c in range(spec.d_sae)]),
        }
    )
    with atomic_file(out) as tmp:
        pacsv.write_csv(table, tmp)
    return out
