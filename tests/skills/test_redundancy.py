"""The IQ-test paper's redundancy criteria flag a planted duplicate task, and only it."""

from __future__ import annotations

import numpy as np

from cg_ray.skills.factors import fit_factors, standardise
from cg_ray.skills.redundancy import redundancy_table

from .planted import two_factor_matrix


def test_planted_duplicate_is_flagged() -> None:
    frame, _ = two_factor_matrix(n_models=150, seed=2)
    rng = np.random.default_rng(7)
    frame["t2_copy"] = frame["t2"] + rng.normal(0, 0.005, len(frame))  # the same task, re-run
    z = standardise(frame)
    table = redundancy_table(z, fit_factors(z.to_numpy(), 2).loadings)
    copy = table.loc["t2_copy"]
    assert copy["nearest_task"] == "t2" and copy["max_abs_r"] > 0.99
    assert copy["collinear"] and copy["predictable"] and copy["redundant"]
    assert copy["structure_unmoved"] and copy["novelty_score"] < 0
    others = table.drop(index=["t2", "t2_copy"])
    assert not others["collinear"].any() and not others["redundant"].any()
    assert table.loc["t2_copy", "novelty_score"] < others["novelty_score"].min()


def test_novel_task_is_not_redundant() -> None:
    frame, _ = two_factor_matrix(n_models=150, seed=4)
    frame["noise"] = np.random.default_rng(5).normal(0.5, 0.1, len(frame))  # unrelated to both skills
    z = standardise(frame)
    row = redundancy_table(z, fit_factors(z.to_numpy(), 2).loadings).loc["noise"]
    assert not row["redundant"] and row["reconstruction_mse"] > 0.5 and row["low_alignment"]
    assert row["novelty_score"] > 0
