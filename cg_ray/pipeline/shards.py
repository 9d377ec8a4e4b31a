"""Resumable work: input rows are cut into fixed shards; each finished shard is persisted atomically.

The work directory `<out>.partial/` holds `plan.json` (the input fingerprint and shard layout), the staged
input rows (`input/`, see `inputs.py`) and one Parquet file per finished shard. A re-run with `--resume`
skips finished shards; the final rows.parquet is assembled from all shards in input order (streaming, one
shard at a time), so it is identical whatever happened in between.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray.artifacts.publish import atomic_file
from cg_ray.errors import CgRayError

SHARD_COLUMN = "_shard"
ORDER_COLUMN = "_order"  # position of the row in the input, restores input order at assembly
PLAN_FILE = "plan.json"
ROW_GROUP_ROWS = 65_536  # rows.parquet's row groups: a few shards each, bounded whatever the suite's size


def fingerprint(config: Mapping[str, object], row_keys: Iterable[str]) -> str:
    """Hash of what determines the results: the resolved config and the input rows' keys, in order."""
    h = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
    for key in row_keys:
        h.update(key.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class ShardPlan:
    n_rows: int
    shard_rows: int
    fingerprint: str

    @property
    def n_shards(self) -> int:
        return max(1, -(-self.n_rows // self.shard_rows))

    def shard_of(self, order: int) -> int:
        return order // self.shard_rows

    def shard_size(self, shard: int) -> int:
        return min(self.shard_rows, self.n_rows - shard * self.shard_rows)


class ShardStore:
    """Finished shards on disk, plus the plan they belong to."""

    def __init__(self, work_dir: Path, plan: ShardPlan) -> None:
        self.dir = work_dir
        self.plan = plan

    @classmethod
    def open(cls, work_dir: Path, plan: ShardPlan, *, resume: bool) -> ShardStore:
        plan_path = work_dir / PLAN_FILE
        if work_dir.exists():
            if not resume:
                raise CgRayError(
                    f"{work_dir} holds an unfinished run: pass --resume to continue it, or delete it to start over"
                )
            if plan_path.is_file():
                stored = json.loads(plan_path.read_text())
                if stored != plan.__dict__:
                    raise CgRayError(
                        f"cannot resume from {work_dir}: it was started with other inputs or settings "
                        f"({PLAN_FILE} differs); delete it to start over"
                    )
        work_dir.mkdir(parents=True, exist_ok=True)
        with atomic_file(plan_path) as tmp:
            tmp.write_text(json.dumps(plan.__dict__, indent=2))
        return cls(work_dir, plan)

    def path(self, shard: int) -> Path:
        return self.dir / f"shard-{shard:06d}.parquet"

    def done(self) -> set[int]:
        return {s for s in range(self.plan.n_shards) if self.path(s).is_file()}

    def write(self, shard: int, table: pa.Table) -> None:
        expected = self.plan.shard_size(shard)
        if table.num_rows != expected:
            raise RuntimeError(f"shard {shard} has {table.num_rows} rows, expected {expected}")
        with atomic_file(self.path(shard)) as tmp:
            pq.write_table(table, tmp)

    def assemble(self, schema: pa.Schema, dest: Path, observe: Callable[[pa.Table], None] | None = None) -> int:
        """Write all shards to `dest` in input order, without the bookkeeping columns; the rows written.

        Streams: one shard (and one row group's buffer) in memory at a time, so the driver's memory does not
        grow with the suite. `dest` appears complete or not at all (a temporary file, then a rename).
        `observe` sees each shard with its bookkeeping columns (the runner's counts)."""
        missing = sorted(set(range(self.plan.n_shards)) - self.done())
        if missing:
            raise RuntimeError(f"cannot assemble: shards {missing[:10]} are not finished")
        written, buffered, buffer = 0, 0, []
        with atomic_file(dest) as tmp, pq.ParquetWriter(tmp, schema) as writer:
            for s in range(self.plan.n_shards):
                shard = pq.read_table(self.path(s))
                if not _in_order(shard[ORDER_COLUMN], s * self.plan.shard_rows, self.plan.shard_size(s)):
                    raise RuntimeError(f"{self.path(s)} does not hold shard {s}'s rows in input order")
                if observe is not None:
                    observe(shard)
                buffer.append(shard.select(schema.names).cast(schema))
                buffered += shard.num_rows
                if buffered >= ROW_GROUP_ROWS:
                    writer.write_table(pa.concat_tables(buffer), row_group_size=ROW_GROUP_ROWS)
                    written, buffered, buffer = written + buffered, 0, []
            if buffer or not written:
                writer.write_table(pa.concat_tables(buffer) if buffer else schema.empty_table())
                written += buffered
        return written

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class ShardCollector:
    """Buffers streamed output rows per shard and writes each shard the moment it is complete."""

    def __init__(self, store: ShardStore) -> None:
        self.store = store
        self._parts: dict[int, list[pa.Table]] = defaultdict(list)
        self._counts: dict[int, int] = defaultdict(int)
        self.written: list[int] = []

    def add(self, table: pa.Table) -> list[int]:
        """Add a batch of output rows; returns the shards completed (and written) by it."""
        finished = []
        shards = table.column(SHARD_COLUMN)
        for shard in pc.unique(shards).to_pylist():
            part = table.filter(pc.equal(shards, shard))
            self._parts[shard].append(part)
            self._counts[shard] += part.num_rows
            if self._counts[shard] == self.store.plan.shard_size(shard):
                self.store.write(shard, pa.concat_tables(self._parts.pop(shard)).sort_by(ORDER_COLUMN))
                finished.append(shard)
        self.written.extend(finished)
        return finished

    @property
    def pending(self) -> Sequence[int]:
        return sorted(self._parts)


def shard_assignment(plan: ShardPlan, done: set[int]) -> list[int]:
    """Input positions still to compute."""
    return [
        i
        for s in pending_shards(plan, done)
        for i in range(s * plan.shard_rows, s * plan.shard_rows + plan.shard_size(s))
    ]


def pending_shards(plan: ShardPlan, done: set[int]) -> list[int]:
    return [s for s in range(plan.n_shards) if s not in done]


def _in_order(order: pa.ChunkedArray, start: int, size: int) -> bool:
    """The shard holds exactly the positions start .. start+size-1, ascending (as `ShardCollector` writes)."""
    values = order.to_numpy()
    return len(values) == size and bool((values == np.arange(start, start + size)).all())


def work_dir_for(out: Path) -> Path:
    return out.with_name(out.name + ".partial")


def ensure_free(out: Path, overwrite: bool) -> None:
    if out.exists() and not overwrite:
        raise CgRayError(f"{out} already exists (pass --overwrite to replace it)")
    os.makedirs(out.parent, exist_ok=True)
