"""Active estimation on a planted IRT population: unbiased, and better than random sampling."""

from __future__ import annotations

import numpy as np
import pytest

from cg_ray.skills.config import EstimateConfig
from cg_ray.skills.estimate import active_order, fit_prior, posterior_estimate
from cg_ray.skills.evaluate import holdout_trace, lomo, summarise

from .planted import irt_population


@pytest.fixture(scope="module")
def lomo_result() -> tuple[np.ndarray, object]:
    scores, tasks = irt_population(n_models=70, n_items=300, seed=0)
    # the prior's latent dimensions match the planted two abilities (with 4 the active order is no better
    # than random rows through the same prior: the gain is then the estimator's, not the choice's)
    config = EstimateConfig(budgets=(0.05, 0.2), n_components=2, random_repeats=2, oracle=True)
    detail = lomo(scores, tasks.astype(str), [f"m{i}" for i in range(len(scores))], config)
    return scores, detail


@pytest.mark.slow  # ~25 s on 2 busy cores: 70 leave-one-model-out fits
def test_estimate_is_unbiased_on_planted_irt(lomo_result: tuple[np.ndarray, object]) -> None:
    _, detail = lomo_result
    active = detail[detail["method"] == "active"]  # type: ignore[index]
    for _budget, g in active.groupby("budget"):
        err = g["error"].to_numpy()
        # mean error within 2.5 standard errors of zero (no systematic shift toward the population mean)
        assert abs(err.mean()) < 2.5 * err.std(ddof=1) / np.sqrt(err.size) + 1e-3


@pytest.mark.slow
def test_active_beats_random_on_planted_irt(lomo_result: tuple[np.ndarray, object]) -> None:
    _, detail = lomo_result
    table = summarise(detail)  # type: ignore[arg-type]
    wide = table.pivot(index="budget", columns="method", values="rmse")
    assert (wide["active"] < wide["random_mean"]).all()
    assert (wide["active"] <= wide["random_prior"] * 1.1).all()
    # the bound: with the held-out model's own scores in the prior the estimator does no worse
    assert (wide["oracle_active"] <= wide["active"] * 1.05).all()
    # per-task estimates too: the prior shares strength across tasks
    tasks = table.pivot(index="budget", columns="method", values="task_rmse")
    assert (tasks["active"] < tasks["random_mean"]).all()


def test_active_order_prefers_informative_rows() -> None:
    scores, _ = irt_population(n_models=50, n_items=200, seed=3)
    scores[:, :20] = 1.0  # rows every model passes carry no information about a new model
    prior = fit_prior(scores[1:], 4)
    order = active_order(prior, np.ones(200, dtype=bool), 30)
    assert len(set(order.tolist())) == 30 and not set(order.tolist()) & set(range(20))


def test_posterior_is_exact_when_everything_is_observed() -> None:
    scores, tasks = irt_population(n_models=30, n_items=120, seed=1)
    prior = fit_prior(scores[1:], 3)
    everything = np.arange(120)
    est = posterior_estimate(prior, np.ones(120, dtype=bool), everything, scores[0], tasks)
    assert est.overall == pytest.approx(scores[0].mean()) and est.overall_se < 1e-3
    for t in np.unique(tasks):
        assert est.per_task[str(t)] == pytest.approx(scores[0][tasks == t].mean())


def test_missing_rows_are_not_chosen_and_not_counted() -> None:
    scores, tasks = irt_population(n_models=30, n_items=120, seed=2)
    scores[0, :10] = np.nan  # the held-out model lacks these rows
    scores[5, 50:60] = np.nan  # and another model lacks others (imputed in the prior)
    trace = holdout_trace(scores, tasks.astype(str), 0, EstimateConfig(budgets=(0.5,), batch=10, n_components=3))
    assert trace.attrs["exhaustive"] == pytest.approx(np.nanmean(scores[0]))
    assert not set(trace.attrs["order"].tolist()) & set(range(10))
    assert trace["n_rows"].iloc[-1] == 55 and np.isfinite(trace["overall"]).all()
    # the interval narrows as rows come in
    assert trace["overall_se"].iloc[-1] < trace["overall_se"].iloc[0]


def test_mle_noise_keeps_the_total_variance_and_sklearns_overstates_it() -> None:
    from sklearn.decomposition import PCA

    others, _ = irt_population(n_models=30, n_items=200, seed=5)  # fewer models than rows, as on AlpacaEval
    others = others[1:]
    total = others.var(axis=0, ddof=1).sum()
    kept = PCA(n_components=4, svd_solver="full").fit(others).explained_variance_.sum()
    mle = fit_prior(others, 4, level_var=0.0, noise="mle")
    sample = fit_prior(others, 4, level_var=0.0, noise="sample")
    assert np.trace(mle.cov) == pytest.approx(total, rel=1e-9)  # Tipping–Bishop: σ² spread over 200 − 4 rows
    sigma2_mle = (total - kept) / 196
    sigma2_sample = (np.trace(sample.cov) - kept) / 196
    # sklearn's σ² averages the 29 − 4 discarded eigenvalues of 29 models only: 196 / 25 times the MLE's
    assert sigma2_sample / sigma2_mle == pytest.approx(196 / 25, rel=1e-6)
    with pytest.raises(ValueError, match="noise"):
        fit_prior(others, 4, noise="other")
