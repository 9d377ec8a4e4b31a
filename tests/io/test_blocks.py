"""Datasets cut into blocks on the driver: the blocks (order, sizes, no row lost) for any table, and that
they stream while a stage's actors hold every CPU of the cluster, where a split repartition hung a run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cg_ray.io.blocks import arrow_dataset, table_slices
from cg_ray.pipeline.inputs import stage_inputs
from cg_ray.pipeline.runner import _pending_dataset


@given(n_rows=st.integers(0, 300), blocks=st.integers(1, 80))
def test_slices_keep_every_row_in_order_in_near_equal_blocks(n_rows: int, blocks: int) -> None:
    table = pa.table({"i": pa.array(range(n_rows), pa.int64())})
    slices = table_slices(table, blocks)
    assert pa.concat_tables(slices).equals(table)
    assert len(slices) == max(1, min(blocks, n_rows))
    sizes = [s.num_rows for s in slices]
    assert max(sizes) - min(sizes) <= 1


def test_blocks_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="blocks must be at least 1, not 0"):
        table_slices(pa.table({"i": [1]}), 0)


@pytest.fixture
def every_cpu_held(ray_module: None) -> Iterator[None]:
    """An actor holding all the cluster's CPUs, as a stage's actor pool does on a small cluster."""
    import ray

    @ray.remote
    class Holder:
        def ready(self) -> bool:
            return True

    cpus = ray.cluster_resources()["CPU"]
    holder: Any = Holder.options(num_cpus=cpus).remote()  # type: ignore[attr-defined]
    ray.get(holder.ready.remote())
    yield
    ray.kill(holder)


def _first_column(batch: pa.Table) -> pa.Table:
    return batch.select(["i"])


@pytest.mark.timeout(120)
def test_a_dataset_cut_on_the_driver_streams_while_every_cpu_is_held(every_cpu_held: None) -> None:
    table = pa.table({"i": pa.array(range(40), pa.int64()), "x": ["a"] * 40})
    ds = arrow_dataset(table, 5).map_batches(_first_column, batch_format="pyarrow", num_cpus=0)
    batches = list(ds.iter_batches(batch_format="pyarrow", batch_size=None))
    assert [b.num_rows for b in batches] == [8] * 5  # Ray Data yields them as they finish, in any order
    assert sorted(pa.concat_tables(batches)["i"].to_pylist()) == list(range(40))


@pytest.mark.timeout(120)
def test_the_runs_staged_shards_stream_while_every_cpu_is_held(every_cpu_held: None, tmp_path: Path) -> None:
    from pydantic import TypeAdapter

    from cg_ray.benchmarks.sources import BenchmarkSource

    source = TypeAdapter(BenchmarkSource).validate_python(
        {"kind": "probes", "per_kind": 5, "seed": 0, "kinds": ["arithmetic", "ordering"]}
    )
    staged = stage_inputs([source], tmp_path / "in", shard_rows=3)
    pending = [0, 2, 3]
    blocks = list(_pending_dataset(staged, pending).iter_batches(batch_format="pyarrow", batch_size=None))
    assert sorted(b.num_rows for b in blocks) == [1, 3, 3]  # a shard a block (10 rows: shard 3 holds 1)
