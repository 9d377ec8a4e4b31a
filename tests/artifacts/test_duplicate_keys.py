"""The repeated-key check of every read of rows.parquet: 16 bytes a row, exact on what it reports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cg_ray.artifacts.rows import DuplicateKeyCheck, iter_row_batches, open_rows
from cg_ray.errors import InputError


def row(row_id: str, benchmark: str = "b1") -> dict[str, object]:
    return {"row_id": row_id, "benchmark": benchmark, "score": 1.0, "concept_ids": [0], "concept_acts": [1.0]}


def read_all(path: Path) -> int:
    return sum(len(b) for b in iter_row_batches(open_rows(path), batch_rows=3))


def test_a_key_repeated_in_a_later_batch_names_both_rows(write_rows: Callable[..., Path]) -> None:
    rows = [row(f"r{i}") for i in range(10)] + [row("r9", "b2"), row("r2"), row("r7"), row("r7")]
    with pytest.raises(InputError) as err:
        read_all(write_rows(rows))
    # the earliest second occurrence is reported: r2 at file row 11, first seen at row 2
    assert err.value.row == 11 and err.value.field == "row_id"
    assert "('b1', 'r2'), first seen at row 2" in str(err.value)


def test_the_same_row_id_in_two_benchmarks_is_not_a_duplicate(write_rows: Callable[..., Path]) -> None:
    assert read_all(write_rows([row(f"r{i}", b) for i in range(5) for b in ("b1", "b2", "b3")])) == 15


def test_a_hash_collision_is_confirmed_on_the_file_and_never_reported(
    write_rows: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # every key hashes alike: only the exact keys read back from the file can tell them apart
    monkeypatch.setattr(DuplicateKeyCheck, "hash_strings", staticmethod(lambda v: np.zeros(len(v), np.uint64)))
    path = write_rows([row(f"r{i}") for i in range(7)])
    assert read_all(path) == 7
    with pytest.raises(InputError, match=r"\('b1', 'r3'\), first seen at row 3"):
        read_all(write_rows([row(f"r{i}") for i in range(7)] + [row("r3")], name="dup.parquet"))


def test_it_keeps_16_bytes_a_row() -> None:
    check = DuplicateKeyCheck(rows=None)  # type: ignore[arg-type]

    n = 10_000
    check.add(pa.array([f"id-{i}" for i in range(n)]), np.zeros(n, np.int32), ["bench"], np.arange(n))
    assert sum(a.nbytes for a in (*check._hashes, *check._file_rows)) == 16 * n
    check.check()  # unique keys: no error, and no need of the file
