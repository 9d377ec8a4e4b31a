"""Arrow tables as a Ray Dataset of several blocks, cut and put on the driver without a Ray task.

Not `from_arrow(table).repartition(n)`: a split repartition is a barrier that the streaming executor runs
inside its scheduling loop, waiting on tasks of one CPU each, and `from_arrow` itself reads each table's
metadata in a task of one CPU. When a stage's actors held the cluster's CPUs those tasks never ran, and a
run hung before its first row (seen in CI; tests/io/test_blocks.py holds every CPU and streams).
`from_blocks` puts the tables as they are; slices share the table's buffers."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    import ray.data


def table_slices(table: pa.Table, blocks: int) -> list[pa.Table]:
    """`table` cut into `blocks` contiguous slices of near-equal rows (fewer when it has fewer rows; one
    empty slice for an empty table, which keeps its schema)."""
    if blocks < 1:
        raise ValueError(f"blocks must be at least 1, not {blocks}")
    n = table.num_rows
    blocks = max(1, min(blocks, n))
    bounds = [n * i // blocks for i in range(blocks + 1)]
    return [table.slice(start, stop - start) for start, stop in itertools.pairwise(bounds)]


def blocks_dataset(tables: Sequence[pa.Table]) -> ray.data.Dataset:
    """A Ray Dataset whose blocks are `tables`, in order, made without a Ray task."""
    import ray.data

    dataset: ray.data.Dataset = ray.data.from_blocks(list(tables))  # untyped in Ray
    return dataset


def arrow_dataset(table: pa.Table, blocks: int = 1) -> ray.data.Dataset:
    """`table` as a Ray Dataset of `blocks` near-equal blocks in order, made without a Ray task."""
    return blocks_dataset(table_slices(table, blocks))
