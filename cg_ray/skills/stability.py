"""How stable the skills are: bootstrap over models (the IQ-test paper's robustness checks).

Each resample refits K factors, is aligned to the full-data loadings by orthogonal Procrustes
(scipy.linalg.orthogonal_procrustes) and compared with Tucker's congruence per factor (≥ 0.95 "equal",
≥ 0.85 "fair", Lorenzo-Seva & ten Berge 2006) and the largest principal angle between the two loading
subspaces (rotation-free). Also: how often each task keeps its main skill, and how many factors parallel
analysis picks in each resample."""

from __future__ import annotations

from typing import Required, TypedDict

import numpy as np
import pandas as pd
from scipy.linalg import orthogonal_procrustes, subspace_angles

from cg_ray.skills.factors import choose_n_factors, fit_factors, standardise


def tucker_congruence(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Column-wise cosine between two loading matrices (tasks × factors)."""
    return np.asarray(np.sum(a * b, axis=0) / np.sqrt(np.sum(a**2, axis=0) * np.sum(b**2, axis=0)))


class Stability(TypedDict, total=False):
    """skills.json's `stability`; with no usable resample only `resamples` (0) and `note`."""

    resamples: Required[int]
    note: str
    congruence_median: list[float]
    congruence_p05: list[float]
    share_congruence_ge_0_85: list[float]
    share_congruence_ge_0_95: list[float]
    max_principal_angle_deg_median: float
    max_principal_angle_deg_p95: float
    main_skill_kept_share: list[float]
    parallel_analysis_counts: dict[str, int]


def bootstrap_stability(
    values: pd.DataFrame, reference: np.ndarray, n_factors: int, *, resamples: int, seed: int
) -> Stability:
    """`values`: the prepared models × tasks DataFrame; `reference`: its full-data loadings."""
    rng = np.random.default_rng(seed)
    n_models = values.shape[0]
    congruence, angles, same_main, picked = [], [], [], []
    main_ref = np.argmax(np.abs(reference), axis=1)
    for _ in range(resamples):
        sample = values.iloc[rng.integers(0, n_models, n_models)]
        if (sample.std(axis=0) <= 1e-12).any():
            continue  # a task constant in this resample
        z = standardise(sample)
        picked.append(choose_n_factors(z, forced=None, iterations=50, quantile=0.95, seed=seed)["n_factors"])
        loadings = fit_factors(z.to_numpy(), n_factors).loadings
        rotation, _ = orthogonal_procrustes(loadings, reference)
        aligned = loadings @ rotation
        congruence.append(np.abs(tucker_congruence(aligned, reference)))
        angles.append(float(np.degrees(np.max(subspace_angles(loadings, reference)))))
        same_main.append(np.argmax(np.abs(aligned), axis=1) == main_ref)
    if not congruence:
        return {"resamples": 0, "note": "every resample had a constant task"}
    c = np.asarray(congruence)
    counts = np.bincount(np.asarray(picked))
    return {
        "resamples": len(congruence),
        "congruence_median": np.median(c, axis=0).tolist(),
        "congruence_p05": np.quantile(c, 0.05, axis=0).tolist(),
        "share_congruence_ge_0_85": np.mean(c >= 0.85, axis=0).tolist(),
        "share_congruence_ge_0_95": np.mean(c >= 0.95, axis=0).tolist(),
        "max_principal_angle_deg_median": float(np.median(angles)),
        "max_principal_angle_deg_p95": float(np.quantile(angles, 0.95)),
        "main_skill_kept_share": np.mean(np.asarray(same_main), axis=0).tolist(),
        "parallel_analysis_counts": {str(k): int(v) for k, v in enumerate(counts) if v},
    }
