"""Arrow schemas of the probe's tables (`cg-ray probe`, docs/probe.md): RUN/probe/items.parquet and
RUN/probe/results.parquet. The probe writes both with these schemas, so a column's type never depends on the
values of one probe (a column all null in it stays typed); `cg_ray.artifacts.probe` reads results.parquet
through PROBE_RESULTS_SCHEMA. Column names are those files on disk have always had."""

from __future__ import annotations

from typing import Final

import pyarrow as pa

# One probe's items, as written before they are numbered (`probe`, appended by the probe's history).
PROBE_ITEMS_SCHEMA: Final = pa.schema(
    [
        ("gap_id", pa.string()),
        ("pair_id", pa.string()),
        ("role", pa.string()),  # target | control
        ("generator", pa.string()),
        ("request_id", pa.string()),
        ("seed", pa.int64()),
        ("prompt", pa.string()),
        ("reference", pa.string()),
        ("scorer", pa.string()),
        ("reader_strength", pa.float64()),  # the gap's strongest concept over its firing threshold (≥ 1: fires)
        ("near_copy", pa.string()),  # what the pair copies, when it does
        ("dropped", pa.string()),  # near_copy | reader | no_answer; null: answered and judged
        ("response", pa.string()),
        ("score", pa.float64()),
        ("score_status", pa.string()),
    ]
)
PROBE_NUMBER: Final = pa.field("probe", pa.int64())  # which probe of the run wrote the row (1, 2, …)
PROBE_ITEMS_FILE_SCHEMA: Final = PROBE_ITEMS_SCHEMA.append(PROBE_NUMBER)
PROBE_ITEMS_FILLED: Final = ("gap_id", "pair_id", "role")  # never null in items.parquet

# One row per gap per probe: what the run said of the gap, what each step kept, the verdict on the new pairs
# (cg_ray.probe.confirm.GapConfirmation), then the probe that wrote the row and the gap's standing verdict.
PROBE_RESULTS_SCHEMA: Final = pa.schema(
    [
        ("rank", pa.int64()),
        ("gap_id", pa.string()),
        ("kind", pa.string()),  # mode | concept
        ("description", pa.string()),
        ("concept_ids", pa.list_(pa.int64())),
        ("run_confirmed", pa.bool_()),
        ("run_rows", pa.int64()),
        ("generator", pa.string()),
        ("requests", pa.int64()),
        ("writer_requests_replaced", pa.int64()),  # a writer's requests whose gap a family then wrote
        ("malformed", pa.int64()),
        ("wrong_reference", pa.int64()),
        ("pairs_written", pa.int64()),
        ("near_copies", pa.int64()),
        ("reader_checked", pa.int64()),
        ("reader_passed", pa.int64()),
        ("reader_pass_rate", pa.float64()),
        ("writer_note", pa.string()),
        ("n_pairs", pa.int64()),
        ("n_clusters", pa.int64()),
        ("n_dropped", pa.int64()),
        ("target_mean", pa.float64()),
        ("control_mean", pa.float64()),
        ("difference", pa.float64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("p_value", pa.float64()),
        ("q_value", pa.float64()),
        ("verdict", pa.string()),  # confirmed | refuted | unsettled | too_few
        ("run_effect", pa.float64()),
        ("mde", pa.float64()),
        ("pairs_needed", pa.int64()),
        ("method", pa.string()),
        ("note", pa.string()),
        ("fdr_share", pa.float64()),
        ("pairs_to_write", pa.int64()),  # unsettled: --pairs for pairs_needed's power with the checks' drops
        ("planned_effect", pa.float64()),  # the effect pairs_needed is planned for (deflated where inflated)
        PROBE_NUMBER,
        ("probe_seed", pa.int64()),
        ("probed_at", pa.string()),  # ISO 8601, UTC
        ("standing", pa.string()),  # the gap's standing verdict, the same on each of its rows
    ]
)
# Columns every results.parquet has had: a file without one is not the probe's. The others read as null where an
# older file lacks them (the probe numbers are then probe 1's: cg_ray.probe.history).
PROBE_RESULTS_REQUIRED: Final = ("gap_id", "verdict", "n_pairs")
