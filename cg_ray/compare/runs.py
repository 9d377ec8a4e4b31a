"""Open the two run directories of a diff and pair their rows by (benchmark, row_id).

Each run's rows are read through the validated reader of rows.parquet (`cg_ray.artifacts.rows`; the rows
of the run's evaluated model when summary.json names one), kept in memory as a sparse rows × d_sae matrix.
Pairing is one Arrow hash join on the keys; every row that cannot be paired is counted, never dropped
silently: rows only in A, only in B, and shared rows without a score in one of the runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from scipy import sparse

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.rows import iter_row_batches, open_rows
from cg_ray.compare.identity import ReaderIdentity, reader_identity
from cg_ray.errors import InputError

REQUIRED_FILES = (S.ROWS_FILE, S.CONCEPTS_FILE, S.SUMMARY_FILE)
TEXT_COLUMNS = ("prompt", "response", "text")


@dataclass
class DiffRun:
    """One side of a diff: its rows (keys, scores, s̃ as CSR) and what its run directory says."""

    name: str  # "A" or "B"
    run: RunDir
    summary: dict[str, Any]
    identity: ReaderIdentity
    keys: pa.Table  # benchmark, row_id, position (0..n-1 in the order read)
    scores: npt.NDArray[np.float64]  # NaN = unscored
    acts: sparse.csr_matrix  # rows × d_sae, float32
    concepts: pa.Table  # concepts.parquet

    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def d_sae(self) -> int:
        return int(self.acts.shape[1])

    @property
    def benchmarks(self) -> list[str]:
        return sorted(set(self.keys.column("benchmark").to_pylist()))

    def label(self) -> str:
        return f"run {self.name} ({self.path})"


def open_diff_run(run: RunDir, name: str) -> DiffRun:
    """A run directory's rows and summary; clear errors for a missing directory or file."""
    if not run.path.is_dir():
        raise InputError(f"run {name}: not a run directory", path=str(run.path))
    for required in REQUIRED_FILES:
        if not run.has(required):
            raise InputError(
                f"run {name}: missing {required} (run `cg-ray metrics` first)", path=str(run.file(required))
            )
    summary = run.read_summary()
    rows = open_rows(run.rows)
    model = summary.get("model_filter")
    benchmarks: list[pa.Array] = []
    row_ids: list[pa.Array] = []
    scores, offsets, ids, acts = [], [np.zeros(1, dtype=np.int64)], [], []
    n_elems = 0
    for batch in iter_row_batches(rows, model=model):
        names = pa.array(batch.benchmark_names, pa.string())
        benchmarks.append(pc.take(names, pa.array(batch.benchmark_codes)))
        row_ids.append(batch.row_ids)
        scores.append(batch.scores)
        offsets.append(batch.offsets[1:] + n_elems)
        n_elems += int(batch.offsets[-1])
        ids.append(batch.concept_ids)
        acts.append(batch.concept_acts)
    n = sum(len(s) for s in scores)
    keys = pa.table(
        {
            "benchmark": pa.concat_arrays(benchmarks),
            "row_id": pa.concat_arrays(row_ids),
            "position": pa.array(np.arange(n, dtype=np.int64)),
        }
    )
    matrix = sparse.csr_matrix(
        (np.concatenate(acts), np.concatenate(ids), np.concatenate(offsets)), shape=(n, rows.d_sae)
    )
    return DiffRun(
        name=name,
        run=run,
        summary=summary,
        identity=reader_identity(run.path, summary),
        keys=keys,
        scores=np.concatenate(scores),
        acts=matrix,
        concepts=pq.read_table(run.file(S.CONCEPTS_FILE)),
    )


@dataclass
class Pairing:
    """Positions of the paired rows in each run (same order), their benchmark codes, and the counts."""

    pos_a: npt.NDArray[np.int64]
    pos_b: npt.NDArray[np.int64]
    codes: npt.NDArray[np.int64]  # into `benchmarks`
    benchmarks: list[str]  # benchmarks with at least one paired row, sorted
    row_ids: list[str]
    counts: dict[str, Any]

    @property
    def n(self) -> int:
        return int(self.pos_a.size)


def _per_benchmark(table: pa.Table, column: str = "benchmark") -> dict[str, int]:
    if table.num_rows == 0:
        return {}
    grouped = table.group_by(column).aggregate([([], "count_all")])
    return dict(zip(grouped.column(column).to_pylist(), grouped.column("count_all").to_pylist(), strict=True))


def pair_rows(a: DiffRun, b: DiffRun) -> Pairing:
    """Rows both runs hold (same benchmark and row_id) and scored in both; the rest counted by kind."""
    left = a.keys.rename_columns(["benchmark", "row_id", "pos_a"])
    right = b.keys.rename_columns(["benchmark", "row_id", "pos_b"])
    shared = left.join(right, ["benchmark", "row_id"], join_type="inner").sort_by("pos_a")
    pos_a = shared.column("pos_a").to_numpy().astype(np.int64)
    pos_b = shared.column("pos_b").to_numpy().astype(np.int64)
    scored = ~np.isnan(a.scores[pos_a]) & ~np.isnan(b.scores[pos_b])
    counts: dict[str, Any] = {
        "rows_a": a.keys.num_rows,
        "rows_b": b.keys.num_rows,
        "shared": shared.num_rows,
        "only_a": a.keys.num_rows - shared.num_rows,
        "only_b": b.keys.num_rows - shared.num_rows,
        "shared_unscored": int((~scored).sum()),  # shared, but a score is missing in A or B
        "paired": int(scored.sum()),
        "benchmarks_only_a": sorted(set(a.benchmarks) - set(b.benchmarks)),
        "benchmarks_only_b": sorted(set(b.benchmarks) - set(a.benchmarks)),
    }
    if shared.num_rows == 0:
        raise InputError(
            f"{a.label()} and {b.label()} share no rows (paired by benchmark and row_id): A has "
            f"{counts['rows_a']:,} rows in {a.benchmarks}, B has {counts['rows_b']:,} rows in {b.benchmarks}",
            field="row_id",
        )
    if not scored.any():
        raise InputError(
            f"{a.label()} and {b.label()} share {shared.num_rows:,} rows but none is scored in both",
            field="score",
        )
    kept = shared.filter(pa.array(scored))
    per_shared = _per_benchmark(shared)
    per_paired = _per_benchmark(kept)
    per_a, per_b = _per_benchmark(a.keys), _per_benchmark(b.keys)
    counts["per_benchmark"] = {
        name: {
            "rows_a": per_a.get(name, 0),
            "rows_b": per_b.get(name, 0),
            "shared": per_shared.get(name, 0),
            "paired": per_paired.get(name, 0),
        }
        for name in sorted(set(per_a) | set(per_b))
    }
    names = kept.column("benchmark").to_pylist()
    benchmarks = sorted(set(names))
    lookup = {n: i for i, n in enumerate(benchmarks)}
    return Pairing(
        pos_a=pos_a[scored],
        pos_b=pos_b[scored],
        codes=np.array([lookup[n] for n in names], dtype=np.int64),
        benchmarks=benchmarks,
        row_ids=kept.column("row_id").to_pylist(),
        counts=counts,
    )


def row_texts(run: DiffRun, positions: list[int]) -> dict[int, dict[str, str | None]]:
    """Text columns of the given rows when rows.parquet carries them and holds one model (else {})."""
    path = run.run.rows
    present = [c for c in TEXT_COLUMNS if c in pq.read_schema(path).names]
    if not present or not positions or run.summary.get("model_filter"):  # a model filter shifts positions
        return {}
    table = pq.read_table(path, columns=present).take(pa.array(positions))
    columns = {c: table[c].to_pylist() for c in present}
    return {pos: {c: columns[c][i] for c in present} for i, pos in enumerate(positions)}
