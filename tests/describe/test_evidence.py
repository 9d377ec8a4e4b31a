"""The streaming evidence pass against brute force, its memory bound, and metadata handling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts.rows import open_rows
from cg_ray.describe.evidence import read_rows, scan
from cg_ray.errors import InputError

from .conftest import planted_rows, rows_schema


def write(tmp_path: Path, rows: list[dict], name: str = "rows.parquet") -> Path:
    path = tmp_path / name
    pq.write_table(pa.Table.from_pylist(rows, schema=rows_schema()), path, row_group_size=100)
    return path


def test_top_k_samples_and_counts_equal_brute_force(tmp_path: Path) -> None:
    rows = planted_rows(500)
    ev = scan(open_rows(write(tmp_path, rows)), [0, 1, 4, 7], k=5, sample=10, background=50, batch_rows=64)
    for c in (0, 1, 4, 7):
        active = [
            (i, r["concept_acts"][r["concept_ids"].index(c)]) for i, r in enumerate(rows) if c in r["concept_ids"]
        ]
        want = sorted(active, key=lambda t: (-np.float32(t[1]), t[0]))[:5]
        got = ev.top[c]
        assert [r for r, _ in got] == [r for r, _ in want]
        np.testing.assert_allclose([v for _, v in got], [v for _, v in want], rtol=1e-6)
        assert ev.n_active[c] == len(active)
        assert len(ev.sample[c]) == 10 and set(ev.sample[c]) <= {i for i, _ in active}
        scores = [rows[i]["score"] for i, _ in active]
        assert ev.mean_score_active[c] == pytest.approx(np.mean(scores))
    sets = {c: {i for i, r in enumerate(rows) if c in r["concept_ids"]} for c in (0, 1, 4, 7)}
    ids = ev.concept_ids
    for a in range(4):
        for b in range(4):
            assert ev.co_active[a, b] == len(sets[ids[a]] & sets[ids[b]])
    assert len(ev.background) == 50
    for r, active in ev.background:
        assert active == frozenset(c for c in ids if c in rows[r]["concept_ids"])
    # geometry rows carry concept 0
    assert ev.value_rows["task"] == {"algebra": 167, "geometry": 167, "poetry": 166}
    assert ev.value_active["task"]["geometry"][ids.index(0)] == ev.n_active[0]


def test_memory_stays_bounded_as_rows_grow(tmp_path: Path) -> None:
    small = open_rows(write(tmp_path, planted_rows(300), "small.parquet"))
    big = open_rows(write(tmp_path, planted_rows(6000, seed=1), "big.parquet"))
    sizes = [scan(r, range(12), k=5, sample=8, background=40, batch_rows=128).state_size for r in (small, big)]
    # the state is fixed by (concepts, k, sample, background, metadata values), not by the 20x more rows
    assert sizes[0] == sizes[1]
    assert sizes[1] < 12 * (5 + 8) * 3 + 40 * 13 + 12 * 12 + 3 * 13 + 4 * 13


def test_same_seed_same_samples_other_seed_other_samples(tmp_path: Path) -> None:
    rows = open_rows(write(tmp_path, planted_rows(400)))
    a, b, c = (scan(rows, [1], sample=10, seed=s) for s in (0, 0, 1))
    assert a.sample == b.sample and a.background == b.background
    assert a.sample != c.sample


def test_nested_and_many_valued_fields_are_skipped_and_noted(tmp_path: Path) -> None:
    ev = scan(open_rows(write(tmp_path, planted_rows(300))), [0])
    assert set(ev.value_rows) == {"task", "level"}
    assert "more than 50 distinct values" in ev.skipped_fields["index"]
    assert ev.skipped_fields["extra"] == "nested value (first at row 5)"


def test_metadata_that_is_not_an_object_is_an_error_naming_the_row(tmp_path: Path) -> None:
    rows = planted_rows(30)
    rows[17]["metadata"] = json.dumps(["not", "an", "object"])
    with pytest.raises(InputError, match=r"row 17.*'metadata'.*not a JSON object"):
        scan(open_rows(write(tmp_path, rows)), [0])


def test_read_rows_returns_only_the_wanted_rows(tmp_path: Path) -> None:
    got = read_rows(open_rows(write(tmp_path, planted_rows(300))), {3, 150, 299}, batch_rows=64)
    assert sorted(got) == [3, 150, 299]
    assert got[150]["row_id"] == "r150" and got[150]["prompt"].startswith("row 150")
