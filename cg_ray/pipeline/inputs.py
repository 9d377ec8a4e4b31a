"""The suite's input rows, staged once on the driver's disk as one Parquet file per shard.

`cg-ray run` used to hold every input row in the driver (a list of dicts, then an Arrow table, then a
row_id → position dict), which made its memory grow ~4 KB a row. Here the loaders' rows are written in
shard-sized pieces as they are produced; the driver keeps only 16 bytes a row (a 64-bit hash of each row
id and its position: the uniqueness check and the lookup of a stage's output row back to its shard) and
Ray Data reads the pending shards' files itself (`local://`: read tasks run on the driver's node).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray.benchmarks.rows import BENCHMARK_ROW_SCHEMA, BenchmarkRow
from cg_ray.benchmarks.sources import BenchmarkSource, source_label
from cg_ray.errors import CgRayError, InputError

log = logging.getLogger(__name__)

INPUT_DIR = "input"  # the staged input's folder in the run's work directory


def row_hash(row_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(row_id.encode(), digest_size=8).digest(), "little")


@dataclass(frozen=True)
class SourceSpan:
    start: int  # position of the source's first row in the suite
    label: str
    path: str | None


@dataclass
class RowIndex:
    """row_id → input position, from sorted 64-bit hashes of the row ids (16 bytes a row)."""

    hashes: npt.NDArray[np.uint64]  # sorted
    positions: npt.NDArray[np.int64]  # positions[i]: input position of the row whose hash is hashes[i]

    @classmethod
    def build(cls, hashes: npt.NDArray[np.uint64]) -> RowIndex:
        order = np.argsort(hashes, kind="stable")  # equal hashes keep input order: first occurrence first
        return cls(hashes[order], order.astype(np.int64))

    def repeats(self) -> list[tuple[int, int]]:
        """(first position, repeated position) of every hash seen twice, the earliest repeat first."""
        same = np.flatnonzero(self.hashes[1:] == self.hashes[:-1])
        pairs = {}
        for i in same.tolist():
            first = i
            while first > 0 and self.hashes[first - 1] == self.hashes[i]:
                first -= 1
            pairs[int(self.positions[i + 1])] = int(self.positions[first])
        return sorted(((f, r) for r, f in pairs.items()), key=lambda p: p[1])

    def locate(self, row_ids: Sequence[str]) -> npt.NDArray[np.int64]:
        wanted = np.fromiter((row_hash(r) for r in row_ids), np.uint64, len(row_ids))
        at = np.searchsorted(self.hashes, wanted)
        found = at < len(self.hashes)
        found[found] = self.hashes[at[found]] == wanted[found]
        if not found.all():
            missing = row_ids[int(np.flatnonzero(~found)[0])]
            raise RuntimeError(f"a stage returned row id {missing!r}, which is not in the input")
        return self.positions[at]


@dataclass
class StagedInput:
    """The staged shard files, and what the driver keeps of the rows."""

    dir: Path
    shard_rows: int
    n_rows: int
    index: RowIndex
    scorers: frozenset[str]
    spans: list[SourceSpan] = field(default_factory=list)

    def path(self, shard: int) -> Path:
        return self.dir / f"shard-{shard:06d}.parquet"

    def keys(self) -> Iterator[str]:
        """`benchmark\\0row_id` of every row in input order (the fingerprint's input), read back per shard."""
        for shard in range(-(-self.n_rows // self.shard_rows)):
            t = pq.read_table(self.path(shard), columns=["benchmark", "row_id"])
            yield from (f"{b}\0{r}" for b, r in zip(t["benchmark"].to_pylist(), t["row_id"].to_pylist(), strict=True))

    def row_id(self, position: int) -> str:
        shard, offset = divmod(position, self.shard_rows)
        value: str = pq.read_table(self.path(shard), columns=["row_id"])["row_id"][offset].as_py()
        return value

    def move_to(self, new_dir: Path) -> None:
        """Into the work directory (replacing the input staged by an earlier attempt of the run)."""
        if new_dir.exists():
            shutil.rmtree(new_dir)
        self.dir.rename(new_dir)
        self.dir = new_dir


class _ShardWriter:
    def __init__(self, dir: Path, shard_rows: int) -> None:
        self.dir, self.shard_rows = dir, shard_rows
        self.buffer: list[BenchmarkRow] = []
        self.written = 0

    def add(self, row: BenchmarkRow) -> None:
        self.buffer.append(row)
        if len(self.buffer) == self.shard_rows:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        # Plain writes: the whole staging directory is temporary until `move_to`.
        pq.write_table(
            pa.Table.from_pylist(self.buffer, schema=BENCHMARK_ROW_SCHEMA),
            self.dir / f"shard-{self.written:06d}.parquet",
        )
        self.written += 1
        self.buffer = []


def stage_inputs(sources: Sequence[BenchmarkSource], dir: Path, shard_rows: int) -> StagedInput:
    """Load every source (in order) into `dir`, `shard_rows` rows a file, with the checks of
    `cg_ray.benchmarks.load_suite`: no empty source, row ids unique across the suite, one scorer_options
    per benchmark. The loaders are the same; only the rows are not kept."""
    from cg_ray.benchmarks import LOADERS, record_scorer_options

    dir.mkdir(parents=True, exist_ok=True)
    writer = _ShardWriter(dir, shard_rows)
    hashes = array("Q")
    scorers: set[str] = set()
    spans: list[SourceSpan] = []
    options: dict[str, dict[str, Any]] = {}
    for source in sources:
        label, path = source_label(source), getattr(source, "path", None)
        spans.append(SourceSpan(len(hashes), label, None if path is None else str(path)))
        benchmarks: set[str] = set()
        for row in LOADERS.get(source.kind)(source):
            hashes.append(row_hash(row["row_id"]))
            benchmarks.add(row["benchmark"])
            scorers.add(row["scorer"])
            writer.add(row)
        n = len(hashes) - spans[-1].start
        if not n:
            raise InputError(f"no rows in {label}", path=path)
        record_scorer_options(options, source, benchmarks)
        log.info("loaded %d rows from %s", n, label)
    writer.flush()
    staged = StagedInput(
        dir, shard_rows, len(hashes), RowIndex.build(np.frombuffer(hashes, np.uint64)), frozenset(scorers), spans
    )
    _check_unique(staged)
    return staged


def _check_unique(staged: StagedInput) -> None:
    for first, repeat in staged.index.repeats():
        first_id, repeat_id = staged.row_id(first), staged.row_id(repeat)
        if first_id != repeat_id:
            raise CgRayError(
                f"row ids {first_id!r} and {repeat_id!r} share a 64-bit hash, which `cg-ray run` uses to "
                "locate rows: rename one of them"
            )
        span = next(s for s in reversed(staged.spans) if s.start <= repeat)
        seen = next(s for s in reversed(staged.spans) if s.start <= first)
        raise InputError(
            f"duplicate row id {repeat_id!r} (first seen in {seen.label})",
            path=span.path,
            row=repeat - span.start,
            field="id",
        )


__all__ = ["INPUT_DIR", "RowIndex", "StagedInput", "row_hash", "stage_inputs"]
