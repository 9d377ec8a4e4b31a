"""Arrow schemas of `cg-ray scope`'s tables (cg_ray.scope, docs/method.md "Benchmark gaps in scope"):
RUN/scope/gaps.parquet, coverage.parquet and rows.parquet. Re-exported by `cg_ray.schemas`."""

from __future__ import annotations

from typing import Final

import pyarrow as pa

from cg_ray.schemas.fields import LABEL_FIELD, floats

__all__ = ["SCOPE_COVERAGE_SCHEMA", "SCOPE_GAPS_SCHEMA", "SCOPE_ROWS_SCHEMA"]

SCOPE_GAPS_SCHEMA: Final = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("reference", pa.string(), nullable=False),
        pa.field("method", pa.string(), nullable=False),  # reference | judge
        pa.field("concept_id", pa.int64(), nullable=False),
        LABEL_FIELD,
        pa.field("bench_rows", pa.int64(), nullable=False),  # rows of the benchmark the concept fires on
        pa.field("bench_n", pa.int64(), nullable=False),
        *floats("bench_share", "bench_low", "bench_high"),
        pa.field("reference_rows", pa.int64(), nullable=False),
        pa.field("reference_n", pa.int64(), nullable=False),
        *floats("reference_share", "reference_low", "reference_high", "ratio", "ratio_low", "ratio_high"),
        *floats("p_value", "q_value"),
        pa.field("firing_threshold", pa.float64(), nullable=False),  # s̃ at which it fires (metrics.firing)
        pa.field("in_reference", pa.bool_(), nullable=False),
        pa.field("gap", pa.bool_(), nullable=False),
        pa.field("missing", pa.bool_(), nullable=False),
        pa.field("in_scope_judge", pa.bool_(), nullable=True),  # the judge's answer, where a judge was asked
        pa.field("judge_reason", pa.string(), nullable=True),
        pa.field("examples", pa.list_(pa.string()), nullable=True),  # reference rows where it fires most
        pa.field("theme", pa.int64(), nullable=True),  # a gap's theme: the concept id representing it
        # each side's sums by group (scope.clustered): what the test used, so augment recomputes it exactly
        *(pa.field(f"{side}_groups", pa.int64(), nullable=True) for side in ("bench", "reference")),
        *(
            pa.field(f"{side}_{name}", pa.float64(), nullable=True)
            for side in ("bench", "reference")
            for name in ("sum_k2", "sum_kn", "sum_n2")
        ),
    ]
)

# scope/rows.parquet: per (benchmark, reference) compared, each reference row's out-of-fold density ratio
# (benchmark / reference, scope/uncovered.py), whether it lies where the benchmark is at most `density` × as
# dense, and the row theme that holds it (the concept carrying the theme; null: none).
SCOPE_ROWS_SCHEMA: Final = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("reference", pa.string(), nullable=False),
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("density_ratio", pa.float64(), nullable=False),
        pa.field("uncovered", pa.bool_(), nullable=False),
        pa.field("theme", pa.int64(), nullable=True),
    ]
)

SCOPE_COVERAGE_SCHEMA: Final = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("reference", pa.string(), nullable=False),  # firing counts depend on the rows read with it
        pa.field("rows", pa.int64(), nullable=False),
        *floats("missing_share", "never_fires_share", "missing_share_of_live"),
        pa.field("missing_bound", pa.float64(), nullable=False),  # a concept on 0 rows: share below this (95%)
    ]
)
