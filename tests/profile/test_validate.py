"""`cg-ray validate`: the grouped split, the curves, planted recovery, and bad input."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cg_ray import schemas as S
from cg_ray.artifacts.rows import load_row_table, open_rows
from cg_ray.cli import main
from cg_ray.config import MetricsConfig
from cg_ray.errors import InputError
from cg_ray.metrics.compute import compute_metrics
from cg_ray.profile.groups import RowGroups
from cg_ray.profile.ranking import eligible
from cg_ray.profile.validate import (
    ValidateConfig,
    grouped_split,
    new_ranking,
    paper_ranking,
    planted_recovery,
    validate,
)
from cg_ray.synthetic import SyntheticPlan, SyntheticSpec, write_synthetic_rows


def run(*argv: str | Path) -> int:
    return main([str(a) for a in argv])


def test_split_is_stratified_and_seeded() -> None:
    strata = np.repeat([0, 1, 2], [100, 37, 11])
    alone = np.arange(strata.size)  # one row a group: round(test_fraction × n) rows of every stratum
    a = grouped_split(strata, alone, 0.2, seed=0)
    assert [int(a[strata == s].sum()) for s in range(3)] == [20, 7, 2]
    assert np.array_equal(a, grouped_split(strata, alone, 0.2, seed=0))
    assert not np.array_equal(a, grouped_split(strata, alone, 0.2, seed=1))
    tiny = grouped_split(np.array([0, 0]), np.array([0, 1]), 0.01, seed=0)
    assert tiny.sum() == 1  # at least one row in each part


def test_the_split_keeps_the_answers_to_one_question_together() -> None:
    strata = np.repeat([0, 1], [400, 120])
    groups = np.arange(strata.size) // 4  # 4 answers a question
    test = grouped_split(strata, groups, 0.2, seed=3)
    for g in range(130):
        assert np.unique(test[groups == g]).size == 1
    assert [int(test[strata == s].sum()) for s in range(2)] == [80, 24]


@st.composite
def grouped_rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, float, int]:
    n = draw(st.integers(2, 80))
    groups = np.array(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)), dtype=np.int64)
    # Mostly one benchmark a group, sometimes a group spanning two.
    strata = np.array(draw(st.lists(st.integers(0, 2), min_size=31, max_size=31)), dtype=np.int64)[groups]
    if draw(st.booleans()):
        strata[0] = (strata[0] + 1) % 3
    return strata, groups, draw(st.floats(0.05, 0.95)), draw(st.integers(0, 2**32 - 1))


@settings(max_examples=300, deadline=None)
@given(grouped_rows())
def test_a_grouped_split_never_puts_one_group_on_both_sides(case: tuple[np.ndarray, np.ndarray, float, int]) -> None:
    strata, groups, fraction, seed = case
    test = grouped_split(strata, groups, fraction, seed)
    for g in np.unique(groups):
        assert np.unique(test[groups == g]).size == 1
    sizes = np.bincount(groups)
    for s in np.unique(strata):
        # The groups living mostly in this stratum: both parts hold some when there are two, and the test part
        # is within one group's rows of the fraction asked for.
        own = [g for g in np.unique(groups) if np.bincount(strata[groups == g], minlength=3).argmax() == s]
        if len(own) >= 2:
            rows = np.isin(groups, own)
            n_test = int(test[rows].sum())
            assert 0 < n_test < int(rows.sum())
            assert abs(n_test - fraction * rows.sum()) <= sizes[own].max()


def test_validate_writes_the_documented_json(tmp_path: Path, capsys) -> None:
    rows = write_synthetic_rows(tmp_path / "rows.parquet", SyntheticSpec(rows_per_benchmark=300, d_sae=256, nnz=16))
    out = tmp_path / "val"
    argv = ["--bootstrap", "200", "--random", "30", "--min-rows", "10", "--null-seeds", "1"]
    assert run("validate", "--rows", rows, "--out", out, *argv) == 0
    report = json.loads((out / S.VALIDATE_FILE).read_text())
    assert {"lift", "low_performance", "baselines", "split", "config", "format_version", "beyond"} <= set(report)
    assert report["format_version"] == 5
    assert report["split"]["n_test"] == 6 * 60 and report["split"]["n_fit"] == 6 * 240
    assert all(s["n_test"] == 60 for s in report["split"]["strata"])
    # No group column, '#' ids or prompts: a row a group, and the split says so.
    assert report["split"]["groups"] == {"rule": "one row each", "n_groups": 6 * 300}
    assert all(s["n_groups_test"] == 60 for s in report["split"]["strata"])
    # The findings beyond the metadata are the run's judgement (`judge_rows`), with its splits and rule.
    judged = report["beyond"]["judgement"]
    assert judged["splits"] == 10 and judged["groups"] == {"rule": "one row each", "n_groups": 1800}
    assert set(judged["confirmed"]) == {"failure_modes", "slices", "slices_beyond_adjusted", "concepts"}
    assert report["null_check"]["unit"] == "group" and len(report["null_check"]["confirmed"]) == 1
    assert [e["k"] for e in report["lift"]] == list(range(1, 21))
    for curve in (report["lift"], report["baselines"]["paper"]["lift"], report["baselines"]["random"]["lift"]):
        for e in curve:
            v = e.get("lift", e.get("value"))
            assert e["low"] <= v <= e["high"]
    assert [e["N"] for e in report["low_performance"]["by_rows"]] == [50, 100, 200, 500]
    by_size = [e["value"] for e in report["low_performance"]["by_size"]]
    assert all(a <= b for a, b in itertools.pairwise(by_size))  # a running minimum
    # The planted hard concepts make the profiled rows fail more than random concepts' rows.
    assert report["lift"][4]["lift"] < report["baselines"]["random"]["lift"][4]["value"]
    assert "lift@5" in capsys.readouterr().out


def test_planted_gaps_are_recovered(tmp_path: Path) -> None:
    scores = {"new": [], "paper": []}
    for seed in range(3):
        spec = SyntheticSpec(d_sae=512, rows_per_benchmark=800, seed=seed)
        table = load_row_table(open_rows(write_synthetic_rows(tmp_path / f"{seed}.parquet", spec)))
        result = compute_metrics(table.accumulate(), MetricsConfig(min_rows=5, top_k=20))
        plan = SyntheticPlan.draw(np.random.default_rng(seed), spec)
        hard = set(np.flatnonzero((plan.effect < 0) & eligible(result)).tolist())
        scores["new"].append(planted_recovery(new_ranking(result, table, 20), hard))
        scores["paper"].append(planted_recovery(paper_ranking(result, 20), hard))
    f1 = {k: float(np.mean([s["f1"] for s in v])) for k, v in scores.items()}
    precision = {k: float(np.mean([s["precision"] for s in v])) for k, v in scores.items()}
    print(f"planted recovery (top 20): F1 {f1}, precision {precision}")
    assert precision["new"] >= 0.75 and f1["new"] >= 0.7
    assert f1["new"] >= f1["paper"]


def test_validate_splits_by_the_groups_it_is_given(tmp_path: Path) -> None:
    spec = SyntheticSpec(d_sae=128, rows_per_benchmark=200, nnz=8)
    table = load_row_table(open_rows(write_synthetic_rows(tmp_path / "rows.parquet", spec)))
    codes = np.arange(table.n_rows, dtype=np.int64) // 5  # 5 rows a group, within one benchmark
    cfg = ValidateConfig(n_bootstrap=20, n_random=5)
    report = validate(table, table.benchmark_codes, cfg, RowGroups(codes, "the group column", int(codes.max()) + 1))
    assert report["split"]["groups"] == {"rule": "the group column", "n_groups": table.n_rows // 5}
    for s in report["split"]["strata"]:
        assert (s["n_fit"], s["n_test"]) == (160, 40) and (s["n_groups_fit"], s["n_groups_test"]) == (32, 8)
    assert report["beyond"] is None  # no judgement given
    # A benchmark whose rows are all one group cannot be split with its groups whole: refused, named.
    codes[table.benchmark_codes == 2] = 10_000
    with pytest.raises(InputError, match=r"benchmark '.+' has its 200 rows in 1 group of its own \(groups by the"):
        validate(table, table.benchmark_codes, cfg, RowGroups(codes, "the group column", 10_001))


def test_planted_recovery_arithmetic() -> None:
    r = planted_recovery([1, 2, 3, 4], {1, 2, 9})
    assert r["precision"] == 0.5 and r["recall"] == pytest.approx(2 / 3) and r["f1"] == pytest.approx(4 / 7)
    assert planted_recovery([], {1})["f1"] == 0.0


@pytest.mark.parametrize(
    ("rows", "argv", "message"),
    [
        ("few", [], "benchmark 'b' has 6 rows: too few"),
        ("unscored", [], "benchmark 'a' has 1 rows without a score"),
        ("one question", [], "benchmark 'b' has its 20 rows in 1 group of its own (groups by row ids up to"),
        ("ok", ["--test-fraction", "1.0"], "--test-fraction must be strictly between 0 and 1"),
        ("ok", ["--test-fraction", "0"], "--test-fraction must be strictly between 0 and 1"),
    ],
)
def test_bad_input_is_named_and_nothing_is_written(write_rows, tmp_path: Path, capsys, rows, argv, message) -> None:
    data = [
        {"row_id": str(i), "benchmark": "a", "score": float(i % 2), "concept_ids": [0], "concept_acts": [1.0]}
        for i in range(20)
    ] + [
        {
            "row_id": f"q#{i}" if rows == "one question" else str(i),  # 20 answers to one question: one group
            "benchmark": "b",
            "score": 1.0,
            "concept_ids": [1],
            "concept_acts": [1.0],
        }
        for i in range(6 if rows == "few" else 20)
    ]
    if rows == "unscored":
        data[3]["score"] = None
    path = write_rows(data, d_sae=4)
    out = tmp_path / "val"
    try:
        code = run("validate", "--rows", path, "--out", out, *argv)
    except SystemExit as exc:  # argparse rejects a bad option value with exit status 2
        code = int(exc.code or 0)
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".val")]
