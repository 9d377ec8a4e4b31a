"""Calibrated standard errors for `cg-ray estimate`.

The posterior SE of the overall score is exact only if the PPCA prior describes the new model; on
AlpacaEval it claims 3–4× the error the estimate makes (its 95% intervals covered every held-out model).
The calibration is empirical: treat some of the prior's own models as new, one at a time, with the same
design and number of rows, and take se_scale = RMS error achieved / RMS SE claimed. The overall SE reported
is the posterior SE × se_scale (the raw one is kept as `overall_se_model`), and `--target-se` is checked
against it; per-task and per-concept SEs get one pooled scale each (too few reference models to scale each
task or concept on its own). Leave-one-model-out checks the result by cross-calibration: the scale learnt on one half of
the models, the coverage of the 95% intervals measured on the other half (`coverage_table`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from cg_ray.skills.config import EstimateConfig
from cg_ray.skills.estimate import Estimate, RowPrior, choose_rows, fit_prior, group_weights, posterior_estimate


@dataclass(frozen=True)
class SeScales:
    """RMS error made / RMS SE claimed, for the overall score and pooled over tasks and over concepts."""

    overall: float = 1.0
    tasks: float = 1.0
    concepts: float = 1.0


@dataclass
class SeCalibration:
    """SE scales at any number of observed rows, from up to `config.calibrate_models` reference models
    (evenly spaced over the models with scores), each held out of its own prior once. With `concepts`
    (s̃, concepts × rows) the per-concept χ_model SEs are calibrated too."""

    scores: np.ndarray  # reference models × rows (NaN = not scored)
    tasks: np.ndarray
    config: EstimateConfig
    concepts: np.ndarray | None = None
    _priors: list[tuple[int, RowPrior]] = field(default_factory=list, init=False)
    _cache: dict[int, SeScales] = field(default_factory=dict, init=False)
    _orders: dict[int, np.ndarray] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        scored = np.flatnonzero(~np.isnan(self.scores).all(axis=1))
        k = min(self.config.calibrate_models, scored.size if scored.size > 2 else 0)
        chosen = scored[np.unique(np.linspace(0, scored.size - 1, k).round().astype(int))] if k else []
        for m in chosen:
            others = np.delete(self.scores, m, axis=0)
            self._priors.append(
                (int(m), fit_prior(others, self.config.n_components, self.config.seed, noise=self.config.noise))
            )

    def scale(self, n_rows: int) -> SeScales:
        """The scales with `n_rows` rows of the design (1.0 where there is nothing to calibrate on or every
        SE is zero)."""
        if n_rows not in self._cache:
            pairs: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in ("overall", "tasks", "concepts")}
            for m, prior in self._priors:
                y = self.scores[m]
                available = ~np.isnan(y)
                n = min(n_rows, int(available.sum()))
                if n == 0:
                    continue
                rows = self._design_rows(m, prior, available, n)
                est = posterior_estimate(prior, available, rows, y[rows], self.tasks, self.concepts)
                names, weights = group_weights(available, self.tasks, self.concepts)
                truth = y[available] @ weights
                _add(pairs["overall"], [est.overall - truth[0]], [est.overall_se_model])
                _add(
                    pairs["tasks"],
                    [est.per_task[t] - truth[g] for g, t in enumerate(names[1:], 1)],
                    [est.per_task_se[t] for t in names[1:]],
                )
                if self.concepts is not None:
                    _add(pairs["concepts"], est.per_concept - truth[len(names) :], est.per_concept_se)
            self._cache[n_rows] = SeScales(**{k: _ratio(*v) for k, v in pairs.items()})
        return self._cache[n_rows]

    def _design_rows(self, m: int, prior: RowPrior, available: np.ndarray, n: int) -> np.ndarray:
        """The first n rows of reference model m's design. Both designs are nested orders, so one order is
        kept per model and only lengthened (doubling) when a longer prefix is asked: a --holdout trace asks
        for every batch size, and the greedy order costs O(n²·rows) to recompute each time."""
        order = self._orders.get(m)
        if order is None or order.size < n:
            longest = max(n, 2 * (order.size if order is not None else 0))
            want = min(int(available.sum()), longest)
            order = self._orders[m] = choose_rows(prior, available, want, self.config.design, self.config.seed + m)
        return order[:n]

    def apply(self, estimate: Estimate, n_rows: int) -> Estimate:
        """The estimate with its SEs calibrated (the overall SE before calibration stays `overall_se_model`)."""
        if not self._priors or n_rows == 0:
            return estimate
        s = self.scale(n_rows)
        return replace(
            estimate,
            overall_se=estimate.overall_se_model * s.overall,
            per_task_se={t: se * s.tasks for t, se in estimate.per_task_se.items()},
            per_concept_se=estimate.per_concept_se * s.concepts,
            se_scale=s.overall,
            task_se_scale=s.tasks,
            concept_se_scale=s.concepts,
        )


def _add(pair: tuple[list[float], list[float]], errors: Any, ses: Any) -> None:
    """Append the finite (error, SE) pairs."""
    for err, se in zip(np.asarray(errors, dtype=float), np.asarray(ses, dtype=float), strict=True):
        if np.isfinite(err) and np.isfinite(se):
            pair[0].append(float(err))
            pair[1].append(float(se))


def _ratio(errors: list[float], ses: list[float]) -> float:
    rms_se = float(np.sqrt(np.mean(np.square(ses)))) if ses else 0.0
    return float(np.sqrt(np.mean(np.square(errors)))) / rms_se if rms_se > 0 else 1.0


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
