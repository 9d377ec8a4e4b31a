"""Profile a new model from k tasks (the IQ-test paper's §7.2), with leave-one-model-out error.

The k tasks are those with the highest communalities; the model's skill profile is the least-squares
θ̂ = (Λ_kᵀΛ_k)⁻¹Λ_kᵀ z_k, its full score vector Λθ̂. Leave-one-model-out: fit on the other models, profile
the held-out one from k tasks, compare with its regression factor scores from all tasks (profile RMSE)
and with its real scores on the tasks it was not run on (score RMSE, raw units)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cg_ray.skills.factors import fit_factors


def top_communality_tasks(communalities: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-communalities, kind="stable")[:k]


def _candidate_ks(n_factors: int, n_tasks: int, most: int = 12) -> list[int]:
    ks = list(range(n_factors, n_tasks))
    if len(ks) > most:
        ks = sorted({round(float(v)) for v in np.linspace(n_factors, n_tasks - 1, most)})
    return ks


def profile_from_k(values: pd.DataFrame, n_factors: int, communalities: np.ndarray) -> pd.DataFrame:
    """One row per k: which tasks (chosen on all models) and the leave-one-model-out errors."""
    raw = values.to_numpy(dtype=float)
    tasks = [str(t) for t in values.columns]
    n_models, n_tasks = raw.shape
    ks = _candidate_ks(n_factors, n_tasks)
    errors: dict[int, list[tuple[float, float]]] = {k: [] for k in ks}
    for m in range(n_models):
        train = np.delete(raw, m, axis=0)
        mean, sd = train.mean(axis=0), train.std(axis=0, ddof=1)
        if np.any(sd <= 0):
            continue  # a task constant without this model: cannot standardise
        sol = fit_factors((train - mean) / sd, n_factors)
        z_m = (raw[m] - mean) / sd
        theta_all = sol.score(z_m)
        for k in ks:
            chosen = top_communality_tasks(sol.communalities, k)
            theta, *_ = np.linalg.lstsq(sol.loadings[chosen], z_m[chosen], rcond=None)
            rest = np.setdiff1d(np.arange(n_tasks), chosen)
            pred = (sol.loadings[rest] @ theta) * sd[rest] + mean[rest]
            profile_err = float(np.sqrt(np.mean((theta - theta_all) ** 2)))
            errors[k].append((profile_err, float(np.sqrt(np.mean((pred - raw[m, rest]) ** 2)))))
    rows = []
    for k in ks:
        e = np.asarray(errors[k]) if errors[k] else np.full((1, 2), np.nan)
        rows.append(
            {
                "k": k,
                "tasks": ", ".join(tasks[i] for i in top_communality_tasks(communalities, k)),
                "profile_rmse": float(np.mean(e[:, 0])),
                "profile_rmse_sd": float(np.std(e[:, 0])),
                "score_rmse": float(np.mean(e[:, 1])),
                "score_rmse_sd": float(np.std(e[:, 1])),
                "n_models": len(errors[k]),
            }
        )
    return pd.DataFrame(rows)
