"""The weakness profile: ranking by the interval's bound, near-duplicate merge, files, descriptions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.cli import main
from cg_ray.config import MetricsConfig
from cg_ray.metrics.accumulator import CGAccumulator
from cg_ray.metrics.compute import compute_metrics
from cg_ray.profile.descriptions import described_profiles, load_descriptions
from cg_ray.profile.grouping import group_near_duplicates
from cg_ray.profile.ranking import weakness_order
from cg_ray.synthetic import SyntheticSpec, write_synthetic_rows


def run(*argv: str | Path) -> int:
    return main([str(a) for a in argv])


def _rows(n: int = 200, seed: int = 0) -> list[dict]:
    """Concept 0: in every row (score 0.6 on average). Concepts 1 and 2: the same 60 rows (2 misses one),
    scored 0.1. Concept 3: 4 rows, all scored 0 (low X_model, little support). Concept 4: 80 rows, 0.3."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        ids, acts = [0], [1.0]
        if i < 60:
            score = float(rng.random() < 0.1)
            ids.append(1)
            acts.append(2.0)
            if i != 59:
                ids.append(2)
                acts.append(1.0 + 0.1 * (i % 3))
        elif i < 64:
            score = 0.0
            ids.append(3)
            acts.append(1.0)
        elif i < 144:
            score = float(rng.random() < 0.3)
            ids.append(4)
            acts.append(1.5)
        else:
            score = float(rng.random() < 0.9)
        out.append({"row_id": str(i), "benchmark": "a", "score": score, "concept_ids": ids, "concept_acts": acts})
    return out


def test_upper_bound_ranking_demotes_low_support_and_merges_near_duplicates(write_rows, tmp_path: Path) -> None:
    rows = write_rows(_rows(), d_sae=6)
    out = tmp_path / "run"
    assert run("metrics", "--rows", rows, "--out", out, "--min-rows", 1, "--rank-by", "upper_bound") == 0
    weak = pq.read_table(out / S.WEAKNESSES_FILE)
    assert weak.schema.equals(S.PROFILE_SCHEMA)
    w = weak.to_pylist()
    # 1 and 2 share 59 of 60 active rows (Jaccard 0.98): one entry, represented by the better-supported 1.
    assert w[0]["concept_id"] == 1 and w[0]["members"] == [1, 2] and w[0]["group"] == 1
    assert [e["concept_id"] for e in w] == [1, 4, 0, 3]
    # Concept 3 has the lowest X_model (0 on 4 rows) but its interval's upper end is the highest: it ranks last.
    assert w[3]["X_model"] == 0.0 and w[3]["X_model_high"] > w[2]["X_model_high"] > w[2]["X_model"]
    assert [e["rank"] for e in w] == [1, 2, 3, 4]
    assert w[0]["n_rows"] == 60 and w[0]["n_eff"] == pytest.approx(60.0)
    assert w[0]["X_model_low"] <= w[0]["X_model"] <= w[0]["X_model_high"]
    assert w[0]["description"] == "concept 1 (no label)" and w[0]["metadata_enrichment"] == []
    assert len(w[0]["example_row_ids"]) == 5 and set(w[0]["example_row_ids"]) <= {str(i) for i in range(60)}

    # The paper's plain ranking puts the unsupported concept first.
    plain = tmp_path / "plain"
    assert run("metrics", "--rows", rows, "--out", plain, "--min-rows", 1, "--rank-by", "x_model") == 0
    assert pq.read_table(plain / S.WEAKNESSES_FILE).column("concept_id").to_pylist()[0] == 3
    # The filters still apply: 3 (4 rows) is gone with --min-rows 10.
    filtered = tmp_path / "filtered"
    assert run("metrics", "--rows", rows, "--out", filtered, "--min-rows", 10, "--rank-by", "upper_bound") == 0
    assert 3 not in pq.read_table(filtered / S.WEAKNESSES_FILE).column("concept_id").to_pylist()
    # A stricter threshold keeps 1 and 2 apart.
    apart = tmp_path / "apart"
    assert (
        run(
            "metrics",
            "--rows",
            rows,
            "--out",
            apart,
            "--min-rows",
            1,
            "--duplicate-jaccard",
            0.99,
            "--rank-by",
            "upper_bound",
        )
        == 0
    )
    assert pq.read_table(apart / S.WEAKNESSES_FILE).column("members").to_pylist()[:2] == [[2], [1]]

    strengths = pq.read_table(out / S.STRENGTHS_FILE).column("concept_id").to_pylist()
    assert strengths[0] == 0
    assert pq.read_table(out / S.COVERAGE_GAPS_FILE).schema.equals(S.PROFILE_SCHEMA)


def test_grouping_is_greedy_around_the_best_supported() -> None:
    sim = np.array([[1.0, 0.9, 0.1], [0.9, 1.0, 0.85], [0.1, 0.85, 1.0]])
    # 1 is best supported: 0 and 2 both join it (each ≥ 0.8 with 1, although 0 and 2 are not alike).
    assert group_near_duplicates(sim, np.array([1.0, 5.0, 2.0]), 0.8).tolist() == [1, 1, 1]
    # 0 best supported: 1 joins 0; 2 is not ≥ 0.8 with 0, so it stands alone.
    assert group_near_duplicates(sim, np.array([5.0, 1.0, 2.0]), 0.8).tolist() == [0, 0, 2]


def test_rank_by_options_order_by_the_right_key() -> None:
    acc = CGAccumulator(3)
    # concept 0: 2 rows, both 0; concept 1: 50 rows at 0.2; concept 2: 50 rows at 0.9.
    ids = [0] * 2 + [1] * 50 + [2] * 50
    scores = np.array([0.0, 0.0] + [float(i % 5 == 0) for i in range(50)] + [float(i % 10 != 0) for i in range(50)])
    acc.add_batch(np.zeros(102, int), ["a"], scores, np.arange(103), np.array(ids), np.ones(102, np.float32))
    result = compute_metrics(acc, MetricsConfig(min_rows=1))
    assert weakness_order(result, "x_model").tolist() == [0, 1, 2]
    assert weakness_order(result, "upper_bound").tolist() == [1, 0, 2]


def test_descriptions_fill_profiles_now_and_later(tmp_path: Path) -> None:
    rows = write_synthetic_rows(tmp_path / "rows.parquet", SyntheticSpec(rows_per_benchmark=200, d_sae=64, nnz=8))
    out = tmp_path / "run"
    assert run("metrics", "--rows", rows, "--out", out, "--min-rows", 5) == 0
    weak = pq.read_table(out / S.WEAKNESSES_FILE)
    first = weak.column("concept_id")[0].as_py()
    assert load_descriptions(RunDir(out)) is None  # no descriptions.parquet yet
    described = pa.table(
        {
            "concept_id": pa.array([first, 63], pa.int32()),
            "description": ["dates and calendars", "unused"],
            "metadata_enrichment": pa.array([["benchmark: date_math (3.1x)"], []], pa.list_(pa.string())),
        }
    )
    pq.write_table(described, out / S.DESCRIPTIONS_FILE)
    # Later: `cg-ray describe` writes back the profiles with the descriptions (described_profiles).
    RunDir(out).update("descriptions", described_profiles(RunDir(out), described))
    again = pq.read_table(out / S.WEAKNESSES_FILE).to_pylist()
    assert again[0]["description"] == "dates and calendars"
    assert again[0]["metadata_enrichment"] == ["benchmark: date_math (3.1x)"]
    assert again[1]["description"] == weak.column("description")[1].as_py()  # untouched where absent
    # Built with descriptions present from the start, the profile takes them directly.
    from cg_ray.artifacts.rows import accumulate_rows, open_rows
    from cg_ray.profile.weaknesses import choose_profiles, write_profiles

    result = compute_metrics(accumulate_rows(open_rows(rows)), MetricsConfig(min_rows=5))
    write_profiles(RunDir(out), result, None, choose_profiles(result, rows))
    assert pq.read_table(out / S.WEAKNESSES_FILE).column("description")[0].as_py() == "dates and calendars"


def test_bad_descriptions_file_is_named(tmp_path: Path) -> None:
    from cg_ray.errors import InputError

    pq.write_table(pa.table({"concept_id": [1]}), tmp_path / S.DESCRIPTIONS_FILE)
    with pytest.raises(InputError, match=r"descriptions\.parquet.*description"):
        load_descriptions(RunDir(tmp_path))


def test_pool_statistics_stream_exactly() -> None:
    from cg_ray.profile.grouping import PoolActivity

    rng = np.random.default_rng(0)
    n, d = 300, 12
    lengths = rng.integers(0, 6, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = np.concatenate([np.sort(rng.choice(d, k, replace=False)) for k in lengths]).astype(np.int32)
    acts = rng.random(ids.size).astype(np.float32)
    acts[::9] = 0.0  # a stored zero does not count as exhibiting
    row_ids = pa.array([f"r{i}" for i in range(n)])
    pool = [3, 0, 7, 11]
    whole = PoolActivity(pool, d)
    whole.add(offsets, ids, acts, row_ids)
    parts = PoolActivity(pool, d)
    for lo, hi in ((0, 50), (50, 51), (51, 300)):
        sl = slice(offsets[lo], offsets[hi])
        parts.add(offsets[lo : hi + 1] - offsets[lo], ids[sl], acts[sl], row_ids.slice(lo, hi - lo))
    np.testing.assert_array_equal(whole.inter, parts.inter)
    sets = {c: set() for c in pool}
    best: dict[int, list[tuple[float, str]]] = {c: [] for c in pool}
    for r in range(n):
        for c, a in zip(ids[offsets[r] : offsets[r + 1]], acts[offsets[r] : offsets[r + 1]], strict=True):
            if int(c) in sets and a > 0:
                sets[int(c)].add(r)
                best[int(c)].append((float(a), f"r{r}"))
    brute = np.array([[len(sets[a] & sets[b]) / len(sets[a] | sets[b]) for b in pool] for a in pool])
    np.testing.assert_allclose(parts.jaccard(pool), brute)
    for c in pool:
        expected = [rid for _, rid in sorted(best[c], key=lambda t: -t[0])[:5]]
        assert parts.example_row_ids(c) == expected == whole.example_row_ids(c)
