"""Seeded synthetic rows.parquet with known structure, for the demo, tests and benchmarks.

Each benchmark draws concepts from a shared Zipf-like popularity plus a topic block of its own; a few
concepts are never drawn (so "missing" exists), and some concepts make the simulated model succeed or
fail more often (so model gaps exist). Generated in chunks, so a million rows stay in bounded memory.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
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


def _popularity(rng: np.random.Generator, spec: SyntheticSpec) -> np.ndarray:
    """(benchmarks × d_sae) draw probabilities."""
    d = spec.d_sae
    base = 1.0 / (np.arange(d) + 10.0) ** 1.1
    base = base[rng.permutation(d)]
    base[rng.random(d) < spec.missing_fraction] = 0.0
    probs = np.empty((len(spec.benchmarks), d))
    for b in range(len(spec.benchmarks)):
        topic = rng.random(d) < 0.02
        w = base * np.where(topic, 25.0, 1.0) * rng.uniform(0.5, 1.5, size=d)
        probs[b] = w / w.sum()
    return probs


def iter_synthetic_batches(spec: SyntheticSpec) -> Iterator[pa.RecordBatch]:
    rng = np.random.default_rng(spec.seed)
    probs = _popularity(rng, spec)
    cdfs = np.cumsum(probs, axis=1)
    # ~10% of concepts move the odds of a correct answer (+ easy, − hard).
    effect = np.where(rng.random(spec.d_sae) < 0.1, rng.normal(0.0, 2.0, spec.d_sae), 0.0)
    base_logit = rng.uniform(-0.5, 1.5, len(spec.benchmarks))
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


def _cmd_example(args: argparse.Namespace) -> int:
    spec = SyntheticSpec(rows_per_benchmark=args.rows_per_benchmark, d_sae=args.d_sae, nnz=args.nnz, seed=args.seed)
    path = write_synthetic_rows(args.out, spec)
    log.info(
        "wrote %s: %d benchmarks × %d rows, d_sae %d, seed %d",
        path,
        len(spec.benchmarks),
        spec.rows_per_benchmark,
        spec.d_sae,
        spec.seed,
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "example",
        help="write a seeded synthetic rows.parquet (demo input for `cg-ray metrics`)",
        description="Write a seeded synthetic rows.parquet with known concept structure.",
    )
    p.add_argument("--out", required=True, type=Path, help="rows.parquet to write")
    p.add_argument("--rows-per-benchmark", type=int, default=1500)
    p.add_argument("--d-sae", type=int, default=4608)
    p.add_argument("--nnz", type=int, default=32, help="concepts drawn per row")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=_cmd_example)
