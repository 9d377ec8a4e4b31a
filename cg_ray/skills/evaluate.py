"""Leave-one-model-out evaluation of active estimation against random row sampling.

For each model in turn: fit the row prior on the other models, pick rows for it actively (one greedy
order, read at every budget) and at random (`random_repeats` draws, plain sample mean; and the same random
rows through the prior's posterior, to separate the choice of rows from the estimator), and compare each
estimate with the model's exhaustive score (the mean over all its scored rows)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cg_ray.skills.calibrate import SeCalibration, coverage_table
from cg_ray.skills.config import EstimateConfig
from cg_ray.skills.estimate import (
    Estimate,
    choose_rows,
    fit_prior,
    group_weights,
    posterior_estimate,
    random_estimate,
    span_floor,
)

log = logging.getLogger(__name__)

METHODS = ("active", "random_prior", "random_mean", "oracle_active", "span_floor")


@dataclass
class _Truth:
    overall: float
    tasks: dict[str, float]
    concepts: np.ndarray  # χ_model per concept over the model's scored rows (NaN: no scored row activates it)

    def row(self, est: Estimate) -> dict[str, float]:
        """Error of the overall score, RMSE over per-task scores and over per-concept scores."""
        task_err = [est.per_task[t] - self.tasks[t] for t in self.tasks]
        out = {"error": est.overall - self.overall, "se": est.overall_se}
        out["task_rmse"] = float(np.sqrt(np.mean(np.square(task_err))))
        if self.concepts.size:
            err = (est.per_concept - self.concepts)[~np.isnan(self.concepts)]
            out["concept_rmse"] = float(np.sqrt(np.mean(np.square(err)))) if err.size else float("nan")
            out["concept_rank_r"] = _rank_r(est.per_concept, self.concepts)
        return out


def _rank_r(estimated: np.ndarray, exhaustive: np.ndarray) -> float:
    """Spearman correlation of the estimated and the exhaustive χ_model over concepts: how well the estimate
    orders the model's own weakness profile (NaN with fewer than 3 concepts or a constant side)."""
    from scipy.stats import spearmanr

    keep = ~np.isnan(estimated) & ~np.isnan(exhaustive)
    # rounded so that concepts tied in exact arithmetic stay tied despite float summation order
    est, exh = np.round(estimated[keep], 12), np.round(exhaustive[keep], 12)
    if keep.sum() < 3 or np.ptp(est) == 0 or np.ptp(exh) == 0:
        return float("nan")
    return float(spearmanr(est, exh).statistic)


def _truth(y: np.ndarray, available: np.ndarray, tasks: np.ndarray, concepts: np.ndarray | None) -> _Truth:
    """The exhaustive scores: the same weighted means as the estimates, over all the model's scored rows."""
    names, weights = group_weights(available, tasks, concepts)
    means = y[available] @ weights
    n_groups = len(names)
    per_concept = np.where(weights[:, n_groups:].sum(axis=0) > 0, means[n_groups:], np.nan)
    return _Truth(float(means[0]), {names[g]: float(means[g]) for g in range(1, n_groups)}, per_concept)


def lomo_one(
    scores: np.ndarray,
    tasks: np.ndarray,
    m: int,
    config: EstimateConfig,
    rng: np.random.Generator,
    concepts: np.ndarray | None = None,
) -> list[dict[str, object]]:
    """Rows of (budget, method, repeat, error of the overall score, RMSE over per-task scores [and over
    per-concept scores, with `concepts`]) for model m."""
    y = scores[m]
    available = ~np.isnan(y)
    n_avail = int(available.sum())
    truth = _truth(y, available, tasks, concepts)
    prior = fit_prior(np.delete(scores, m, axis=0), config.n_components, config.seed, noise=config.noise)
    sizes = [max(1, round(b * n_avail)) for b in config.budgets]
    # a new scramble of the balanced design per held-out model: the figures average over design draws
    design_seed = config.seed + m
    order = choose_rows(prior, available, max(sizes), config.design, design_seed)
    oracle = fit_prior(scores, config.n_components, config.seed, noise=config.noise) if config.oracle else None
    oracle_order = choose_rows(oracle, available, max(sizes), config.design, design_seed) if oracle else None
    out: list[dict[str, object]] = []
    for budget, n in zip(config.budgets, sizes, strict=True):
        head = {"budget": budget, "n_rows": n}
        est = posterior_estimate(prior, available, order[:n], y[order[:n]], tasks, concepts)
        out.append(head | {"method": "active", "repeat": 0} | truth.row(est))
        # the reference line: random rows with the model's in-span part known (its RMSE is the floor)
        floor = {"error": span_floor(prior, y, n) ** 0.5, "se": float("nan"), "task_rmse": float("nan")}
        out.append(head | {"method": "span_floor", "repeat": 0} | floor)
        if oracle is not None and oracle_order is not None:
            pick = oracle_order[:n]
            est = posterior_estimate(oracle, available, pick, y[pick], tasks, concepts)
            out.append(head | {"method": "oracle_active", "repeat": 0} | truth.row(est))
        for r in range(config.random_repeats):
            pick = rng.choice(np.flatnonzero(available), size=n, replace=False)
            plain = random_estimate(y, pick, available, tasks, concepts)
            out.append(head | {"method": "random_mean", "repeat": r} | truth.row(plain))
            post = posterior_estimate(prior, available, pick, y[pick], tasks, concepts)
            out.append(head | {"method": "random_prior", "repeat": r} | truth.row(post))
    return out


def lomo(
    scores: np.ndarray,
    tasks: np.ndarray,
    models: list[str],
    config: EstimateConfig,
    concepts: np.ndarray | None = None,
) -> pd.DataFrame:
    """Every model held out once; one row per (model, budget, method, repeat)."""
    rng = np.random.default_rng(config.seed)
    rows: list[dict[str, object]] = []
    for m, name in enumerate(models):
        if np.isnan(scores[m]).all():
            continue
        for row in lomo_one(scores, tasks, m, config, rng, concepts):
            rows.append({"model": name, **row})
        log.debug("lomo: %s done", name)
    return pd.DataFrame(rows)


def summarise(detail: pd.DataFrame, seed: int = 0, resamples: int = 1000) -> pd.DataFrame:
    """RMSE per (budget, method) across models, a 95% bootstrap interval over models, and how often
    active beats random_mean for the same model (|error| smaller than the mean |error| of its draws)."""
    rng = np.random.default_rng(seed)
    has_concepts = "concept_rmse" in detail.columns
    per_model = detail.assign(
        sq=detail["error"] ** 2,
        tsq=detail["task_rmse"] ** 2,
        csq=detail["concept_rmse"] ** 2 if has_concepts else np.nan,
        rank_r=detail["concept_rank_r"] if "concept_rank_r" in detail.columns else np.nan,
    )
    columns = ["sq", "tsq", "csq", "rank_r", "se"]
    per_model = per_model.groupby(["budget", "method", "model"], as_index=False)[columns].mean()
    rows = []
    for (budget, method), g in per_model.groupby(["budget", "method"]):
        sq = g["sq"].to_numpy()
        boot = np.sqrt(sq[rng.integers(0, sq.size, (resamples, sq.size))].mean(axis=1))
        rows.append(
            {
                "budget": budget,
                "method": method,
                "rmse": float(np.sqrt(sq.mean())),
                "rmse_lo": float(np.quantile(boot, 0.025)),
                "rmse_hi": float(np.quantile(boot, 0.975)),
                "task_rmse": float(np.sqrt(g["tsq"].mean())),
                # the interval the estimator claims, to set against the RMSE it achieves
                "mean_se": float(g["se"].mean()),
                "n_models": int(sq.size),
            }
            | (
                # mean over models of the Spearman r of each model's concept profile (1 = same weakness order)
                {"concept_rmse": float(np.sqrt(g["csq"].mean())), "concept_rank_r": float(g["rank_r"].mean())}
                if has_concepts
                else {}
            )
        )
    table = pd.DataFrame(rows).merge(coverage_table(detail, seed), on=["budget", "method"], how="left")
    abs_err = detail.assign(abs_error=detail["error"].abs()).groupby(["budget", "method", "model"])["abs_error"].mean()
    wide = abs_err.unstack("method")
    if {"active", "random_mean"} <= set(wide.columns):
        wins = (wide["active"] < wide["random_mean"]).groupby(level="budget").mean()
        table["active_beats_random_share"] = table["budget"].map(wins)
    return table.sort_values(["budget", "method"]).reset_index(drop=True)


def holdout_trace(scores: np.ndarray, tasks: np.ndarray, m: int, config: EstimateConfig) -> pd.DataFrame:
    """Estimate model m as if new: batches of `config.batch` rows chosen actively, its scores revealed
    batch by batch, until the largest budget or until the overall SE is below `config.target_se`."""
    y = scores[m]
    available = ~np.isnan(y)
    prior = fit_prior(np.delete(scores, m, axis=0), config.n_components, config.seed, noise=config.noise)
    limit = max(1, round(max(config.budgets) * int(available.sum())))
    order = choose_rows(prior, available, limit, config.design, config.seed)
    calibration = SeCalibration(np.delete(scores, m, axis=0), tasks, config)  # the others only
    rows: list[dict[str, object]] = []
    for n in range(config.batch, limit + config.batch, config.batch):
        n = min(n, limit)
        est = calibration.apply(posterior_estimate(prior, available, order[:n], y[order[:n]], tasks), n)
        rows.append(
            {
                "n_rows": n,
                "overall": est.overall,
                "overall_se": est.overall_se,
                "overall_se_model": est.overall_se_model,
                **{f"task:{t}": v for t, v in est.per_task.items()},
            }
        )
        if n >= limit or (config.target_se is not None and est.overall_se < config.target_se):
            break
    trace = pd.DataFrame(rows)
    trace.attrs["exhaustive"] = float(y[available].mean())
    trace.attrs["order"] = order[: int(trace["n_rows"].iloc[-1])]
    return trace
