"""Subsampling and adversarial ablation (paper §4.2.3)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cg_ray.artifacts.rows import load_row_table, open_rows
from cg_ray.cli import main
from cg_ray.config import MetricsConfig, RobustnessConfig
from cg_ray.metrics.compute import compute_metrics
from cg_ray.metrics.robustness import adversarial_ablation, subsampling, subtract
from cg_ray.synthetic import SyntheticSpec, write_synthetic_rows


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("rob") / "rows.parquet"
    write_synthetic_rows(path, SyntheticSpec(rows_per_benchmark=400, d_sae=512, nnz=24, seed=3))
    return load_row_table(open_rows(path))


def test_subtracting_removed_rows_equals_recomputing_the_kept_ones(table) -> None:
    rng = np.random.default_rng(1)
    removed = np.sort(rng.choice(table.n_rows, size=table.n_rows // 3, replace=False))
    kept = np.setdiff1d(np.arange(table.n_rows), removed)
    via_subtract = compute_metrics(subtract(table.accumulate(), table.accumulate(removed)))
    direct = compute_metrics(table.accumulate(kept))
    for key in ("chi_bench", "chi_model", "X_bench", "X_model", "n_active_rows"):
        np.testing.assert_allclose(getattr(via_subtract, key), getattr(direct, key), rtol=1e-9, atol=1e-12, equal_nan=True)
    # Activity is exact: no concept stays "active" through rounding once its rows are gone.
    assert np.array_equal(via_subtract.act_sum > 0, direct.act_sum > 0)


def test_subsampling_reports_small_but_nonzero_spread(table) -> None:
    full = table.accumulate()
    report, per_concept = subsampling(table, full, MetricsConfig(), RobustnessConfig(repeats=12, seed=0))
    assert 0 < report["X_model_std_mean"] < 0.2
    assert 0 < report["X_bench_std_mean"] < 0.5
    assert per_concept["X_model_std"].shape == (512,)
    # Dropping more rows spreads the scores more.
    heavy, _ = subsampling(table, full, MetricsConfig(), RobustnessConfig(repeats=12, seed=0, drop_fraction=0.6))
    assert heavy["X_model_std_mean"] > report["X_model_std_mean"]
    # Seeded: the same seed gives the same figures.
    again, _ = subsampling(table, full, MetricsConfig(), RobustnessConfig(repeats=12, seed=0))
    assert again["X_model_std_mean"] == report["X_model_std_mean"]


def test_ablation_moves_the_median_the_predicted_way(table) -> None:
    cfg = RobustnessConfig(ablation_concepts=30, ablation_rows=100, ablation_control_repeats=5)
    out = adversarial_ablation(table, table.accumulate(), MetricsConfig(min_rows=5), cfg)
    assert out["remove_best"]["rows_removed"] == 100
    assert out["remove_best"]["median_shift"] < 0 < out["remove_worst"]["median_shift"]
    control = out["random_control"]
    assert abs(out["remove_best"]["median_shift"] - control["median_shift_mean"]) > control["median_shift_std"]


def test_robustness_cli(tmp_path: Path) -> None:
    rows = write_synthetic_rows(tmp_path / "rows.parquet", SyntheticSpec(rows_per_benchmark=200, d_sae=256))
    out = tmp_path / "rob"
    assert main(["robustness", "--rows", str(rows), "--out", str(out), "--repeats", "5"]) == 0
    report = json.loads((out / "robustness.json").read_text())
    assert report["subsampling"]["repeats"] == 5
    assert {"remove_best", "remove_worst", "random_control"} <= set(report["adversarial_ablation"])
    assert (out / "robustness_concepts.parquet").exists()
    assert main(["robustness", "--rows", str(rows), "--out", str(tmp_path / "x"), "--drop-fraction", "1.5"]) == 2
    assert not (tmp_path / "x").exists()


def test_metrics_recover_the_planted_truth(table) -> None:
    """On synthetic data with planted easy/hard concepts, CG ranks them where they belong."""
    from cg_ray.synthetic import SyntheticPlan

    spec = SyntheticSpec(rows_per_benchmark=400, d_sae=512, nnz=24, seed=3)
    plan = SyntheticPlan.draw(np.random.default_rng(spec.seed), spec)
    result = compute_metrics(table.accumulate(), MetricsConfig(min_rows=10))
    well_measured = result.n_active_rows >= 30
    hard = well_measured & (plan.effect < -1)
    easy = well_measured & (plan.effect > 1)
    neutral = well_measured & (plan.effect == 0)
    assert hard.sum() >= 3 and easy.sum() >= 3
    assert result.X_model[hard].mean() < result.X_model[neutral].mean() < result.X_model[easy].mean()
    # Concepts never drawn are exactly the missing ones.
    never = plan.probs.max(axis=0) == 0
    assert np.array_equal(result.X_bench == 0, never)
