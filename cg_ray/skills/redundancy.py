"""The IQ-test paper's task redundancy diagnostics (its §7.1), one row per task.

Each criterion votes +1 (novel) or −1 (redundant); `novelty_score` is their mean in [−1, 1].
- max |r| with another task > 0.9 → redundant;
- R² of the task regressed on all the others > 0.8 → redundant (only defined with more models than tasks);
- reconstruction MSE ≤ 0.10 (standardised units) when the task's scores are projected onto the factor
  scores of a fit *without* it → redundant (well represented by the existing skills);
- the largest principal angle between the other tasks' loading subspaces with and without it < 15° →
  redundant (adding it does not move the skill space).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.linalg import subspace_angles

from cg_ray.skills.factors import fit_factors, ledermann_bound

MAX_R = 0.9
MAX_R2 = 0.8
MIN_MSE = 0.10
MIN_ANGLE_DEG = 15.0
LOW_LOADING = 0.3


def _r2_from_others(z: np.ndarray, j: int) -> float | None:
    n_models, n_tasks = z.shape
    if n_models <= n_tasks:
        return None  # a saturated regression: R² = 1 says nothing
    others = np.delete(z, j, axis=1)
    design = np.column_stack([np.ones(n_models), others])
    coef, *_ = np.linalg.lstsq(design, z[:, j], rcond=None)
    resid = z[:, j] - design @ coef
    return float(1.0 - resid.var() / z[:, j].var())


def _without(z: np.ndarray, j: int, n_factors: int, full_loadings: np.ndarray) -> tuple[float, float, float]:
    """(reconstruction MSE, largest |projected loading|, angle shift in degrees) for task j left out."""
    others = np.delete(z, j, axis=1)
    k = min(n_factors, ledermann_bound(others.shape[1]))
    sol = fit_factors(others, k)
    theta = sol.scores
    lam, *_ = np.linalg.lstsq(theta, z[:, j], rcond=None)  # paper eq. (9)
    mse = float(np.mean((z[:, j] - theta @ lam) ** 2))  # eq. (10)
    angles = subspace_angles(np.delete(full_loadings, j, axis=0), sol.loadings)
    return mse, float(np.max(np.abs(lam))), float(np.degrees(np.max(angles)))


def redundancy_table(z: pd.DataFrame, loadings: np.ndarray) -> pd.DataFrame:
    values = z.to_numpy(dtype=float)
    tasks = [str(t) for t in z.columns]
    corr = np.corrcoef(values, rowvar=False)
    np.fill_diagonal(corr, 0.0)
    rows = []
    for j, task in enumerate(tasks):
        nearest = int(np.argmax(np.abs(corr[j])))
        r2 = _r2_from_others(values, j)
        mse, top_loading, angle = _without(values, j, loadings.shape[1], loadings)
        flags = {
            "collinear": bool(abs(corr[j, nearest]) > MAX_R),
            "predictable": None if r2 is None else bool(r2 > MAX_R2),
            "well_reconstructed": bool(mse <= MIN_MSE),
            "structure_unmoved": bool(angle < MIN_ANGLE_DEG),
        }
        votes = [-1.0 if f else 1.0 for f in flags.values() if f is not None]
        rows.append(
            {
                "task": task,
                "nearest_task": tasks[nearest],
                "max_abs_r": float(abs(corr[j, nearest])),
                "r2_from_others": r2,
                "reconstruction_mse": mse,
                "max_projected_loading": top_loading,
                "low_alignment": bool(top_loading < LOW_LOADING),
                "angle_shift_deg": angle,
                **flags,
                "novelty_score": float(np.mean(votes)),
                "redundant": bool(flags["collinear"] or flags["predictable"]),
            }
        )
    return pd.DataFrame(rows).set_index("task")
