"""Planted matrices for the skills tests: known factor structure, a known duplicate task, an IRT population."""

from __future__ import annotations

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
