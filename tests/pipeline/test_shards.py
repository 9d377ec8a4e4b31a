"""Resumable shard store: finished shards persist, resume skips them, assembly restores input order."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray.errors import CgRayError
from cg_ray.pipeline.shards import (
    ORDER_COLUMN,
    SHARD_COLUMN,
    ShardCollector,
    ShardPlan,
    ShardStore,
    fingerprint,
    shard_assignment,
)

SCHEMA = pa.schema([("row_id", pa.string()), ("value", pa.int64())])


def rows(plan: ShardPlan, positions) -> pa.Table:
    positions = list(positions)
    return pa.table(
        {
            "row_id": [f"r{i}" for i in positions],
            "value": [i * i for i in positions],
            SHARD_COLUMN: [plan.shard_of(i) for i in positions],
            ORDER_COLUMN: positions,
        }
    )


def test_plan_layout() -> None:
    plan = ShardPlan(n_rows=10, shard_rows=4, fingerprint="x")
    assert plan.n_shards == 3
    assert [plan.shard_size(s) for s in range(3)] == [4, 4, 2]
    assert [plan.shard_of(i) for i in (0, 3, 4, 9)] == [0, 0, 1, 2]


def test_collector_writes_complete_shards_out_of_order_and_assembles_in_order(tmp_path: Path) -> None:
    plan = ShardPlan(10, 4, "x")
    store = ShardStore.open(tmp_path / "w", plan, resume=False)
    collector = ShardCollector(store)
    # Output arrives shuffled and split across batches, as from a streaming executor.
    assert collector.add(rows(plan, [9, 1, 8])) == [2]
    assert collector.add(rows(plan, [0, 5, 6])) == []
    assert collector.add(rows(plan, [3, 2, 4, 7])) == [0, 1]
    assert store.done() == {0, 1, 2}
    seen: list[int] = []
    assert store.assemble(SCHEMA, tmp_path / "rows.parquet", observe=lambda t: seen.append(t.num_rows)) == 10
    table = pq.read_table(tmp_path / "rows.parquet")
    assert table.column("row_id").to_pylist() == [f"r{i}" for i in range(10)]
    assert table.schema == SCHEMA
    assert seen == [4, 4, 2]  # one shard at a time, with its bookkeeping columns


def test_assembly_streams_into_row_groups_and_refuses_a_shard_out_of_order(tmp_path: Path, monkeypatch) -> None:
    import cg_ray.pipeline.shards as shards

    monkeypatch.setattr(shards, "ROW_GROUP_ROWS", 8)  # a row group every two shards of 4
    plan = ShardPlan(20, 4, "x")
    store = ShardStore.open(tmp_path / "w", plan, resume=False)
    ShardCollector(store).add(rows(plan, range(20)))
    dest = tmp_path / "rows.parquet"
    assert store.assemble(SCHEMA, dest) == 20
    meta = pq.read_metadata(dest)
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [8, 8, 4]
    assert pq.read_table(dest).column("value").to_pylist() == [i * i for i in range(20)]
    # A shard file whose rows are not its input positions in order is refused; nothing is left at dest.
    bad = rows(plan, [7, 6, 5, 4])
    pq.write_table(bad, store.path(1))
    with pytest.raises(RuntimeError, match="shard 1's rows in input order"):
        store.assemble(SCHEMA, tmp_path / "again.parquet")
    assert not (tmp_path / "again.parquet").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_resume_skips_finished_shards_and_rejects_other_inputs(tmp_path: Path) -> None:
    plan = ShardPlan(10, 4, fingerprint({"a": 1}, ["k"]))
    store = ShardStore.open(tmp_path / "w", plan, resume=False)
    ShardCollector(store).add(rows(plan, range(4, 8)))  # shard 1 only, then "killed"
    with pytest.raises(CgRayError, match="--resume"):
        ShardStore.open(tmp_path / "w", plan, resume=False)
    resumed = ShardStore.open(tmp_path / "w", plan, resume=True)
    assert resumed.done() == {1}
    assert shard_assignment(plan, resumed.done()) == [0, 1, 2, 3, 8, 9]
    with pytest.raises(CgRayError, match="other inputs or settings"):
        ShardStore.open(tmp_path / "w", ShardPlan(10, 4, fingerprint({"a": 2}, ["k"])), resume=True)
    with pytest.raises(RuntimeError, match="not finished"):
        resumed.assemble(SCHEMA, tmp_path / "rows.parquet")
    assert not (tmp_path / "rows.parquet").exists()


def test_a_shard_with_the_wrong_row_count_is_never_written(tmp_path: Path) -> None:
    plan = ShardPlan(4, 4, "x")
    store = ShardStore.open(tmp_path / "w", plan, resume=False)
    with pytest.raises(RuntimeError, match="expected 4"):
        store.write(0, rows(plan, [0, 1]))
    assert store.done() == set()
