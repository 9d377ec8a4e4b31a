"""The probe's one reader of results.parquet (cg_ray.artifacts.probe): it reads back what the probe's writer
(history.merged_results, in schemas.probe.PROBE_RESULTS_SCHEMA) wrote, and refuses a file whose columns are not
the probe's, naming the file and the field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.probe import ProbeEntry, ProbeResult, probe_summary, read_probe_items, read_probe_results
from cg_ray.errors import InputError
from cg_ray.probe.history import merged_results
from cg_ray.schemas.probe import PROBE_ITEMS_FILE_SCHEMA, PROBE_ITEMS_SCHEMA, PROBE_RESULTS_SCHEMA

TESTED = {"n_pairs": 30, "n_clusters": 30, "n_dropped": 2, "target_mean": 0.4, "control_mean": 0.7,
          "difference": -0.3, "ci_low": -0.45, "ci_high": -0.15, "p_value": 0.001, "q_value": 0.002,
          "run_effect": -0.2, "mde": 0.12, "method": "cluster_t", "note": "", "fdr_share": 0.8}  # fmt: skip


def _new(*rows: dict[str, object]) -> pa.Table:
    """A probe's own rows as tables.results_table makes them (its probe columns are the history's)."""
    base = {"kind": "mode", "description": "d", "concept_ids": [3, 9], "run_confirmed": True, "run_rows": 60,
            "generator": "family:logic.chain", "requests": 40, "writer_requests_replaced": 0, "malformed": 0,
            "wrong_reference": 0, "pairs_written": 40, "near_copies": 1, "reader_checked": 39,
            "reader_passed": 37, "reader_pass_rate": 37 / 39, "writer_note": ""}  # fmt: skip
    return pa.Table.from_pylist([base | r for r in rows], schema=PROBE_RESULTS_SCHEMA)


def _written(tmp_path: Path, table: pa.Table) -> RunDir:
    (tmp_path / "probe").mkdir(exist_ok=True)
    pq.write_table(table, tmp_path / L.PROBE_RESULTS)
    return RunDir(tmp_path)


def test_the_reader_reads_back_what_the_writer_wrote(tmp_path: Path) -> None:
    """Probe 2 tested mode:1 (every gap too_few: its figures all null) beside probe 1's attempt at mode:2."""
    earlier = ProbeResult(gap_id="mode:2", verdict="unsettled", probe=1, probe_seed=0, rank=1, pairs_needed=90,
                          probed_at="2026-11-26T10:00:00+00:00", standing="unsettled", **{
                              k: v for k, v in TESTED.items() if k not in ("n_pairs", "note")})  # fmt: skip
    entry = ProbeEntry(probe=2, at="2026-11-27T10:00:00+00:00", gaps=("mode:1",), pairs=40, seed=1, fdr=0.05)
    too_few = {"gap_id": "mode:1", "verdict": "too_few", "n_pairs": 1, "n_clusters": 1, "n_dropped": 39,
               "method": "", "note": "1 pairs, under 5"}  # fmt: skip
    table = merged_results(_new(too_few), entry, [earlier])
    assert table.schema.equals(PROBE_RESULTS_SCHEMA)  # an all-null column keeps its type
    read = read_probe_results(_written(tmp_path, table))
    assert read is not None and [r.row() for r in read] == table.to_pylist()
    mine, kept = read
    assert (mine.gap_id, mine.probe, mine.probe_seed, mine.rank, mine.standing) == ("mode:1", 2, 1, 1, "too_few")
    assert mine.ci_low is None and mine.concept_ids == [3, 9] and mine.generator == "family:logic.chain"
    assert kept == replace(earlier, rank=2)  # carried as judged, ranked after this probe's rows


def test_a_summary_reads_as_typed_records_and_its_probes_as_written() -> None:
    entry = {"probe": 2, "at": "2026-11-27T10:00:00+00:00", "gaps": ["mode:1"], "pairs": 40, "seed": 1,
             "fdr": 0.05, "share": 0.2}  # fmt: skip
    older = {"probe": 1, "at": None, "gaps": ["mode:2"], "pairs": 40, "seed": 0}  # before fdr was spent per probe
    summary = probe_summary({"gaps": [{"gap_id": "mode:1", "verdict": "too_few", "n_pairs": 1}],
                             "probes": [older, entry | {"forgotten": True}], "requests": {"model": 2}})  # fmt: skip
    assert summary.gaps == (ProbeResult(gap_id="mode:1", verdict="too_few", n_pairs=1),)
    assert [p.document() for p in summary.probes] == [older, entry | {"forgotten": True}]
    assert summary.probes[1].forgotten and summary.requests == {"model": 2} and summary.decision == ""


@pytest.mark.parametrize(
    ("column", "values", "said"),
    [
        ("verdict", None, "field 'verdict': missing column of the probe's table"),
        ("n_pairs", ["30"], "field 'n_pairs': column is string, expected int64"),
        ("p_value", ["0.01"], "field 'p_value': column is string, expected double"),
        ("concept_ids", [1.5], "field 'concept_ids': column is double, expected list<item: int64>"),
        ("gap_id", [None], "row 0, field 'gap_id': null in a column the probe always fills"),
    ],
)
def test_a_file_whose_columns_are_not_the_probes_is_refused_naming_file_and_field(
    tmp_path: Path, column: str, values: list[object] | None, said: str
) -> None:
    row = {"gap_id": "mode:1", "verdict": "unsettled", **TESTED}
    table = pa.Table.from_pylist([row]).drop_columns([column] if column in row else [])
    if values is not None:
        kept = table.drop_columns([column]) if column in table.schema.names else table
        table = kept.append_column(column, pa.array(values, type=pa.string() if values == [None] else None))
    run = _written(tmp_path, table)
    with pytest.raises(InputError) as refused:
        read_probe_results(run)
    assert str(refused.value) == f"{run.file(L.PROBE_RESULTS)}, {said}"


def test_integers_where_floats_are_due_and_columns_an_older_file_lacks_are_read(tmp_path: Path) -> None:
    table = pa.Table.from_pylist([{"gap_id": "mode:1", "verdict": "refuted", "n_pairs": 30, "difference": 0}])
    (read,) = read_probe_results(_written(tmp_path, table)) or []
    assert read == ProbeResult(gap_id="mode:1", verdict="refuted", n_pairs=30, difference=0.0)
    assert isinstance(read.difference, float)


def test_items_are_read_in_their_schema_and_a_file_without_one_of_their_columns_is_refused(tmp_path: Path) -> None:
    item = {"gap_id": "mode:1", "pair_id": "mode:1/0", "role": "target", "seed": 0, "prompt": "p", "score": 1.0}
    (tmp_path / "probe").mkdir()
    pq.write_table(pa.Table.from_pylist([item], schema=PROBE_ITEMS_SCHEMA), tmp_path / L.PROBE_ITEMS)
    read = read_probe_items(RunDir(tmp_path))  # written before probes were numbered: no `probe` column
    assert read is not None and read.schema.equals(PROBE_ITEMS_FILE_SCHEMA) and read["probe"].to_pylist() == [None]
    pq.write_table(pa.Table.from_pylist([item], schema=PROBE_ITEMS_SCHEMA).drop_columns(["role"]),
                   tmp_path / L.PROBE_ITEMS)  # fmt: skip
    with pytest.raises(InputError, match=r"items\.parquet, field 'role': missing column of the probe's table"):
        read_probe_items(RunDir(tmp_path))
