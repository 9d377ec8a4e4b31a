"""Staged input: the suite's rows on disk a shard a file, checked like `load_suite`, located by row id."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import TypeAdapter

from cg_ray.benchmarks import load_benchmarks
from cg_ray.benchmarks.rows import BENCHMARK_ROW_SCHEMA, rows_table
from cg_ray.benchmarks.sources import BenchmarkSource
from cg_ray.errors import CgRayError, InputError
from cg_ray.pipeline.inputs import RowIndex, row_hash, stage_inputs

parse_source = TypeAdapter(BenchmarkSource).validate_python


def probes(per_kind: int = 7, seed: int = 0):
    return parse_source({"kind": "probes", "per_kind": per_kind, "seed": seed, "kinds": ["arithmetic", "ordering"]})


def local(path: Path, ids: list[int]):
    path.write_text("".join(json.dumps({"id": i, "prompt": f"q{i}", "reference": "1"}) + "\n" for i in ids))
    return parse_source({"kind": "local", "path": str(path), "benchmark": "b", "scorer": "exact"})


def test_staged_rows_equal_the_loaded_suite_in_shard_files(tmp_path: Path) -> None:
    sources = [probes(), local(tmp_path / "b.jsonl", [1, 2, 3])]
    staged = stage_inputs(sources, tmp_path / "in", shard_rows=4)
    expected = rows_table(load_benchmarks(sources))
    assert staged.n_rows == expected.num_rows == 17
    files = sorted((tmp_path / "in").iterdir())
    assert [f.name for f in files] == [f"shard-{s:06d}.parquet" for s in range(5)]
    assert [pq.read_metadata(f).num_rows for f in files] == [4, 4, 4, 4, 1]
    table = pa.concat_tables(pq.read_table(f) for f in files)
    assert table.schema == BENCHMARK_ROW_SCHEMA and table.equals(expected)
    assert list(staged.keys()) == [
        f"{b}\0{r}" for b, r in zip(expected["benchmark"].to_pylist(), expected["row_id"].to_pylist(), strict=True)
    ]
    assert staged.scorers == frozenset(expected["scorer"].to_pylist())
    # Every row id is found at its input position, in any order; an unknown id is an error naming it.
    ids = expected["row_id"].to_pylist()
    shuffled = np.random.default_rng(0).permutation(len(ids))
    assert staged.index.locate([ids[i] for i in shuffled]).tolist() == shuffled.tolist()
    with pytest.raises(RuntimeError, match="'nope'"):
        staged.index.locate(["nope"])


def test_a_duplicate_row_id_is_refused_naming_the_file_row_and_first_source(tmp_path: Path) -> None:
    a = local(tmp_path / "a.jsonl", [1, 2, 3])
    b = local(tmp_path / "b.jsonl", [5, 6, 2, 7, 1])
    with pytest.raises(InputError, match=r"duplicate row id '2' \(first seen in local:.*a\.jsonl\)") as err:
        stage_inputs([a, b], tmp_path / "in", shard_rows=2)
    assert err.value.path == str(tmp_path / "b.jsonl") and err.value.row == 2 and err.value.field == "id"
    with pytest.raises(InputError) as loaded:  # the same error as loading the suite in memory
        load_benchmarks([a, b])
    assert str(err.value) == str(loaded.value)


def test_an_empty_source_and_conflicting_scorer_options_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match="no rows in local:"):
        stage_inputs([parse_source({"kind": "local", "path": str(empty), "benchmark": "e"})], tmp_path / "x", 4)
    one = parse_source({"kind": "probes", "per_kind": 2, "seed": 0, "kinds": ["arithmetic"]})
    two = parse_source(
        {"kind": "probes", "per_kind": 2, "seed": 1, "kinds": ["arithmetic"], "scorer_options": {"strict": True}}
    )
    with pytest.raises(InputError, match="different scorer_options"):
        stage_inputs([one, two], tmp_path / "y", 4)


def test_a_hash_collision_between_distinct_ids_is_an_error_not_a_wrong_row(tmp_path: Path) -> None:
    index = RowIndex.build(np.array([5, 9, 5, 7, 9, 9], np.uint64))
    assert index.repeats() == [(0, 2), (1, 4), (1, 5)]  # (first position, repeated position), earliest repeat first
    staged = stage_inputs([local(tmp_path / "b.jsonl", [1, 2])], tmp_path / "in", shard_rows=4)
    staged.index = RowIndex.build(np.array([row_hash("b-1"), row_hash("b-1")], np.uint64))  # pretend they collide
    from cg_ray.pipeline.inputs import _check_unique

    with pytest.raises(CgRayError, match="share a 64-bit hash"):
        _check_unique(staged)
