"""Calibrated SEs: the prior's own SE is too wide; the calibrated one covers about 95% of held-out models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cg_ray import cli
from cg_ray.skills.calibrate import SeCalibration
from cg_ray.skills.config import EstimateConfig
from cg_ray.skills.estimate import choose_rows, fit_prior, posterior_estimate
from cg_ray.skills.evaluate import lomo, summarise

from .planted import irt_population, suite_file


def test_calibrated_intervals_cover_about_95_percent_of_held_out_models() -> None:
    scores, tasks = irt_population(n_models=60, n_items=200, seed=11)
    config = EstimateConfig(budgets=(0.05, 0.2), n_components=2, random_repeats=1)
    table = summarise(lomo(scores, tasks.astype(str), [f"m{i}" for i in range(60)], config))
    active = table[table["method"] == "active"].set_index("budget")
    # the PPCA prior's SE is too wide: every model inside its 95% interval, the error well under the SE
    assert (active["coverage_95"] == 1.0).all() and (active["se_scale"] < 0.8).all()
    # scaled on one half of the models, the intervals cover about 95% of the other half
    assert ((active["coverage_95_calibrated"] >= 0.85) & (active["coverage_95_calibrated"] < 1.0)).all()


def test_se_scales_are_the_error_made_over_the_se_claimed() -> None:
    scores, tasks = irt_population(n_models=40, n_items=150, seed=12)
    tasks = tasks.astype(str)
    config = EstimateConfig(n_components=2, calibrate_models=8)
    concepts = (np.random.default_rng(0).random((5, 150)) < 0.3).astype(float)  # 5 planted concepts' s̃
    calibration = SeCalibration(scores[1:], tasks, config, concepts)  # model 0 plays the new model
    scales = calibration.scale(30)
    assert calibration.scale(30) is scales  # cached per number of rows
    for value in (scales.overall, scales.tasks, scales.concepts):
        assert 0.1 < value < 1.5
    # the definition, recomputed for the overall score from the same 8 reference models
    errors, ses = [], []
    for m in np.unique(np.linspace(0, 38, 8).round().astype(int)):
        prior = fit_prior(np.delete(scores[1:], m, axis=0), 2)
        rows = choose_rows(prior, np.ones(150, dtype=bool), 30, "balanced", m)
        est = posterior_estimate(prior, np.ones(150, dtype=bool), rows, scores[1:][m, rows], tasks)
        errors.append(est.overall - scores[1:][m].mean())
        ses.append(est.overall_se)
    assert scales.overall == pytest.approx(np.sqrt(np.mean(np.square(errors)) / np.mean(np.square(ses))))
    prior = fit_prior(scores[1:], 2)
    raw = posterior_estimate(prior, np.ones(150, dtype=bool), np.arange(30), scores[0, :30], tasks, concepts)
    calibrated = calibration.apply(raw, 30)
    assert calibrated.overall == raw.overall and calibrated.overall_se_model == raw.overall_se
    assert calibrated.overall_se == pytest.approx(raw.overall_se * scales.overall)
    assert calibrated.per_task_se == pytest.approx({t: se * scales.tasks for t, se in raw.per_task_se.items()})
    assert np.allclose(calibrated.per_concept_se, raw.per_concept_se * scales.concepts)
    assert calibrated.per_concept == pytest.approx(raw.per_concept)  # the estimates themselves do not move
    assert calibration.apply(raw, 0) is raw  # nothing observed yet: the prior's SE stands
    off = SeCalibration(scores[1:], tasks, EstimateConfig(n_components=2, calibrate_models=0))
    assert off.apply(raw, 30) is raw


def test_observed_writes_the_calibrated_and_the_model_se(tmp_path: Path) -> None:
    scores, _, suite = suite_file(tmp_path)
    observed = tmp_path / "observed.csv"
    pd.DataFrame({"row_id": [f"r{j}" for j in range(0, 90, 4)], "score": scores[0, ::4]}).to_csv(observed, index=False)
    metas = {}
    for models in ("10", "0"):
        out = tmp_path / f"step{models}"
        argv = ["estimate", "--scores", str(suite), "--observed", str(observed), "--out", str(out)]
        assert cli.main([*argv, "--components", "2", "--calibrate-models", models]) == 0
        metas[models] = json.loads((out / "estimate.json").read_text())["estimate"]
    on, off = metas["10"], metas["0"]
    assert on["overall"] == pytest.approx(off["overall"]) and off["se_scale"] == 1.0
    assert on["overall_se_model"] == pytest.approx(off["overall_se"])
    assert on["overall_se"] == pytest.approx(on["overall_se_model"] * on["se_scale"]) and on["se_scale"] != 1.0
