"""`cg-ray validate`: the split, the curves, planted recovery, and bad input."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.rows import load_row_table, open_rows
from cg_ray.cli import main
from cg_ray.config import MetricsConfig
from cg_ray.metrics.compute import compute_metrics
from cg_ray.profile.ranking import eligible
from cg_ray.profile.validate import new_ranking, paper_ranking, planted_recovery, stratified_split
from cg_ray.synthetic import SyntheticPlan, SyntheticSpec, write_synthetic_rows


def run(*argv: str | Path) -> int:
    return main([str(a) for a in argv])


def test_split_is_stratified_and_seeded() -> None:
    strata = np.repeat([0, 1, 2], [100, 37, 11])
    a = stratified_split(strata, 0.2, seed=0)
    assert [int(a[strata == s].sum()) for s in range(3)] == [20, 7, 2]
    assert np.array_equal(a, stratified_split(strata, 0.2, seed=0))
    assert not np.array_equal(a, stratified_split(strata, 0.2, seed=1))
    tiny = stratified_split(np.array([0, 0]), 0.01, seed=0)
    assert tiny.sum() == 1  # at least one row in each part


def test_validate_writes_the_documented_json(tmp_path: Path, capsys) -> None:
    rows = write_synthetic_rows(tmp_path / "rows.parquet", SyntheticSpec(rows_per_benchmark=300, d_sae=256, nnz=16))
    out = tmp_path / "val"
    assert run("validate", "--rows", rows, "--out", out, "--bootstrap", 200, "--random", 30, "--min-rows", 10) == 0
    report = json.loads((out / S.VALIDATE_FILE).read_text())
    assert {"lift", "low_performance", "baselines", "split", "config", "format_version"} <= set(report)
    assert report["split"]["n_test"] == 6 * 60 and report["split"]["n_fit"] == 6 * 240
    assert all(s["n_test"] == 60 for s in report["split"]["strata"])
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


def test_planted_recovery_arithmetic() -> None:
    r = planted_recovery([1, 2, 3, 4], {1, 2, 9})
    assert r["precision"] == 0.5 and r["recall"] == pytest.approx(2 / 3) and r["f1"] == pytest.approx(4 / 7)
    assert planted_recovery([], {1})["f1"] == 0.0


@pytest.mark.parametrize(
    ("rows", "argv", "message"),
    [
        ("few", [], "benchmark 'b' has 6 rows: too few"),
        ("unscored", [], "benchmark 'a' has 1 rows without a score"),
        ("ok", ["--test-fraction", "1.0"], "--test-fraction must be strictly between 0 and 1"),
        ("ok", ["--test-fraction", "0"], "--test-fraction must be strictly between 0 and 1"),
    ],
)
def test_bad_input_is_named_and_nothing_is_written(write_rows, tmp_path: Path, capsys, rows, argv, message) -> None:
    data = [
        {"row_id": str(i), "benchmark": "a", "score": float(i % 2), "concept_ids": [0], "concept_acts": [1.0]}
        for i in range(20)
    ] + [
        {"row_id": str(i), "benchmark": "b", "score": 1.0, "concept_ids": [1], "concept_acts": [1.0]}
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
