"""Calibrated standard errors for `cg-ray estimate`.

The posterior SE of the overall score is exact only if the PPCA prior describes the new model; on
AlpacaEval it claims 3–4× the error the estimate makes (its 95% intervals covered every held-out model).
The calibration is empirical: treat some of the prior's own models as new, one at a time, with the same
design and number of rows, and take se_scale = RMS error achieved / RMS SE claimed. The overall SE reported
is the posterior SE × se_scale (the raw one is kept as `overall_se_model`), and `--target-se` is checked
against it. Leave-one-model-out checks the result by cross-calibration: the scale learnt on one half of
the models, the coverage of the 95% intervals measured on the other half (`coverage_table`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from cg_ray.skills.config import EstimateConfig
from cg_ray.skills.estimate import Estimate, RowPrior, choose_rows, fit_prior, posterior_estimate


@dataclass
class SeCalibration:
    """se_scale at any number of observed rows, from up to `config.calibrate_models` reference models
    (evenly spaced over the models with scores), each held out of its own prior once."""

    scores: np.ndarray  # reference models × rows (NaN = not scored)
    tasks: np.ndarray
    config: EstimateConfig
    _priors: list[tuple[int, RowPrior]] = field(default_factory=list, init=False)
    _cache: dict[int, float] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        scored = np.flatnonzero(~np.isnan(self.scores).all(axis=1))
        k = min(self.config.calibrate_models, scored.size if scored.size > 2 else 0)
        chosen = scored[np.unique(np.linspace(0, scored.size - 1, k).round().astype(int))] if k else []
        for m in chosen:
            others = np.delete(self.scores, m, axis=0)
            self._priors.append(
                (int(m), fit_prior(others, self.config.n_components, self.config.seed, noise=self.config.noise))
            )

    def scale(self, n_rows: int) -> float:
        """RMS error / RMS posterior SE of the overall score with `n_rows` rows of the design (1.0 when there
        is nothing to calibrate on or every error and SE is zero)."""
        if n_rows not in self._cache:
            errors, ses = [], []
            for m, prior in self._priors:
                y = self.scores[m]
                available = ~np.isnan(y)
                n = min(n_rows, int(available.sum()))
                if n == 0:
                    continue
                rows = choose_rows(prior, available, n, self.config.design, self.config.seed + m)
                est = posterior_estimate(prior, available, rows, y[rows], self.tasks)
                errors.append(est.overall - float(y[available].mean()))
                ses.append(est.overall_se)
            rms_se = float(np.sqrt(np.mean(np.square(ses)))) if ses else 0.0
            self._cache[n_rows] = float(np.sqrt(np.mean(np.square(errors)))) / rms_se if rms_se > 0 else 1.0
        return self._cache[n_rows]

    def apply(self, estimate: Estimate, n_rows: int) -> Estimate:
        """The estimate with its overall SE calibrated (per-task and per-concept SEs stay model-based)."""
        if not self._priors or n_rows == 0:
            return estimate
        scale = self.scale(n_rows)
        return replace(estimate, overall_se=estimate.overall_se_model * scale, se_scale=scale)


def coverage_table(detail: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per (budget, method): the share of held-out models inside their 95% interval (±1.96 SE) as claimed,
    the pooled se_scale, and the share inside the interval calibrated by 2-fold cross-calibration over models
    (scale from one half, coverage on the other), the honest check of the calibration."""
    rng = np.random.default_rng(seed)
    models = detail["model"].unique()
    fold = dict(zip(rng.permutation(models), np.arange(models.size) % 2, strict=True))
    per_model = detail[["budget", "method", "model", "error", "se"]].dropna(subset=["se"])  # every draw
    per_model = per_model.assign(fold=per_model["model"].map(fold))
    rows = []
    for (budget, method), g in per_model.groupby(["budget", "method"]):
        inside = 0
        for f in (0, 1):
            train, test = g[g["fold"] != f], g[g["fold"] == f]
            scale = _scale(train)
            inside += int((test["error"].abs() <= 1.96 * test["se"] * scale).sum())
        rows.append(
            {
                "budget": budget,
                "method": method,
                "coverage_95": float((g["error"].abs() <= 1.96 * g["se"]).mean()),
                "se_scale": _scale(g),
                "coverage_95_calibrated": inside / len(g),
            }
        )
    return pd.DataFrame(rows)


def _scale(frame: pd.DataFrame) -> float:
    rms_se = float(np.sqrt(np.mean(np.square(frame["se"]))))
    return float(np.sqrt(np.mean(np.square(frame["error"])))) / rms_se if rms_se > 0 else 1.0
