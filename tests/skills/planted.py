"""Planted matrices for the skills tests: known factor structure, a known duplicate task, an IRT population."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def two_factor_matrix(n_models: int = 120, seed: int = 0, noise: float = 0.45) -> tuple[pd.DataFrame, np.ndarray]:
    """Tasks t0–t3 measure skill A, t4–t7 skill B (true loadings returned, tasks × 2)."""
    rng = np.random.default_rng(seed)
    true = np.zeros((8, 2))
    true[:4, 0] = [0.9, 0.8, 0.85, 0.75]
    true[4:, 1] = [0.8, 0.9, 0.7, 0.85]
    skills = rng.standard_normal((n_models, 2))
    unique = np.sqrt(1 - (true**2).sum(axis=1))
    scores = skills @ true.T + rng.standard_normal((n_models, 8)) * unique * noise / 0.45
    frame = pd.DataFrame(
        0.5 + 0.1 * scores,
        index=[f"model-{i}" for i in range(n_models)],
        columns=[f"t{j}" for j in range(8)],
    )
    return frame, true


def irt_population(n_models: int = 60, n_items: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A 2PL population with two abilities: binary per-row scores (models × items) and the item tasks."""
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((n_models, 2)) * [1.2, 0.6]
    tasks = rng.integers(0, 4, n_items)
    direction = np.stack([np.ones(n_items), np.where(tasks % 2 == 0, 1.0, -1.0)], axis=1)
    a = rng.uniform(0.6, 2.0, n_items)[:, None] * direction
    b = rng.normal(0.0, 1.0, n_items)
    p = 1.0 / (1.0 + np.exp(-(theta @ a.T - b)))
    return (rng.random(p.shape) < p).astype(float), tasks


def suite_file(
    tmp_path: Path, n_models: int = 25, n_items: int = 90, seed: int = 7
) -> tuple[np.ndarray, np.ndarray, Path]:
    """An IRT population with models 1.. written as a suite's per-row scores (rows r0, r1, …); model 0 is
    left out of the file, to play a new model."""
    scores, tasks = irt_population(n_models=n_models, n_items=n_items, seed=seed)
    long = pd.DataFrame(
        [
            {"model": f"m{i}", "row_id": f"r{j}", "score": scores[i, j], "task": f"task{tasks[j]}"}
            for i in range(1, n_models)
            for j in range(n_items)
        ]
    )
    path = tmp_path / "suite.csv"
    long.to_csv(path, index=False)
    return scores, tasks.astype(str), path
