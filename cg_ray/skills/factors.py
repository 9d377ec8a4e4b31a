"""How many factors, and the factor solution: principal axis factoring + varimax via factor_analyzer.

factor_analyzer's `method="principal"` is a principal-components extraction; iterated principal axis
factoring converges to the unweighted-least-squares (MINRES) solution, which is its `method="minres"`
(tested against a plain iterated PAF in tests/skills). Varimax is factor_analyzer's own rotation.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import pandas as pd


def standardise(values: pd.DataFrame) -> pd.DataFrame:
    return (values - values.mean(axis=0)) / values.std(axis=0, ddof=1)


def ledermann_bound(n_tasks: int) -> int:
    """Largest K with (p - K)² ≥ p + K: more factors than this are not identified from p tasks."""
    k = 0
    while k + 1 < n_tasks and (n_tasks - k - 1) ** 2 >= n_tasks + k + 1:
        k += 1
    return max(1, k)


def parallel_analysis(n_models: int, n_tasks: int, *, iterations: int, quantile: float, seed: int) -> np.ndarray:
    """Horn's (1965) thresholds: the `quantile` of each ordered correlation eigenvalue of random normal
    matrices of the same shape. Written here because no maintained library in our dependencies has it;
    it is a dozen lines of numpy."""
    rng = np.random.default_rng(seed)
    eig = np.empty((iterations, n_tasks))
    for i in range(iterations):
        sample = rng.standard_normal((n_models, n_tasks))
        eig[i] = np.sort(np.linalg.eigvalsh(np.corrcoef(sample, rowvar=False)))[::-1]
    return np.asarray(np.quantile(eig, quantile, axis=0))


def _leading_count(flags: np.ndarray) -> int:
    """Number of leading True values."""
    return int(np.argmin(flags)) if not flags.all() else int(flags.size)


def scree_elbow(eigenvalues: np.ndarray) -> int:
    """Acceleration-factor elbow (Raîche et al., 2013): the factors before the largest second difference."""
    if eigenvalues.size < 3:
        return 1
    accel = eigenvalues[:-2] - 2 * eigenvalues[1:-1] + eigenvalues[2:]
    # accel[j] is the bend at the (j+2)-th eigenvalue (1-based); the factors before the bend are j + 1
    return max(1, int(np.argmax(accel)) + 1)


class FactorChoice(TypedDict):
    """skills.json's `n_factors`: every criterion's count and the one used."""

    eigenvalues: list[float]
    parallel_thresholds: list[float]
    cumulative_variance: list[float]
    criteria: dict[str, int]
    ledermann_bound: int
    source: str
    n_factors: int
    capped: bool


def choose_n_factors(
    z: pd.DataFrame, *, forced: int | None, iterations: int, quantile: float, seed: int
) -> FactorChoice:
    """All the criteria, and the one used: --n-factors if given, else parallel analysis (at least 1),
    capped by the Ledermann bound."""
    n_models, n_tasks = z.shape
    corr = np.corrcoef(z.to_numpy(), rowvar=False)
    eig = np.sort(np.linalg.eigvalsh(corr))[::-1]
    thresholds = parallel_analysis(n_models, n_tasks, iterations=iterations, quantile=quantile, seed=seed)
    cumulative = np.cumsum(eig) / eig.sum()
    criteria = {
        "parallel_analysis": max(1, _leading_count(eig > thresholds)),
        "kaiser": max(1, int((eig > 1.0).sum())),
        "scree_elbow": scree_elbow(eig),
        "cumulative_85pct": int(np.searchsorted(cumulative, 0.85) + 1),
    }
    # The IQ-test paper's rule: Kaiser's λ > 1 together with 85% cumulative variance (the larger of the two).
    criteria["iq_paper"] = max(criteria["kaiser"], criteria["cumulative_85pct"])
    bound = ledermann_bound(n_tasks)
    wanted = forced if forced is not None else criteria["parallel_analysis"]
    return {
        "eigenvalues": eig.tolist(),
        "parallel_thresholds": thresholds.tolist(),
        "cumulative_variance": cumulative.tolist(),
        "criteria": criteria,
        "ledermann_bound": bound,
        "source": "--n-factors" if forced is not None else "parallel_analysis",
        "n_factors": int(min(wanted, bound)),
        "capped": bool(wanted > bound),
    }


@dataclass
class FactorSolution:
    loadings: np.ndarray  # tasks × factors, varimax-rotated
    communalities: np.ndarray
    uniquenesses: np.ndarray
    weights: np.ndarray  # tasks × factors: regression (Thurstone) factor-score weights R⁻¹Λ
    scores: np.ndarray  # models × factors: z @ weights
    variance: np.ndarray  # 3 × factors: SS loadings, proportion, cumulative

    def score(self, z: np.ndarray) -> np.ndarray:
        """Regression factor scores of standardised rows (models × tasks, standardised like the fit)."""
        return np.asarray(np.asarray(z, dtype=float) @ self.weights)


def fit_factors(z: np.ndarray, n_factors: int) -> FactorSolution:
    """PAF (MINRES) + varimax on a standardised models × tasks array; signs set so each factor's
    loadings sum to a positive number (higher factor score = better)."""
    from factor_analyzer import FactorAnalyzer

    rotation = "varimax" if n_factors > 1 else None
    corr = np.corrcoef(np.asarray(z, dtype=float), rowvar=False)
    # squared multiple correlations (the usual start) need R⁻¹: with fewer models than tasks R is singular
    singular = np.linalg.matrix_rank(corr) < corr.shape[0]
    fa = FactorAnalyzer(
        n_factors=n_factors, rotation=rotation, method="minres", svd_method="lapack", use_smc=not singular
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # singular-matrix and Heywood chatter: reported via our own checks
        fa.fit(z)
    loadings = np.asarray(fa.loadings_, dtype=float)
    loadings = loadings * np.where(loadings.sum(axis=0) < 0, -1.0, 1.0)
    loadings = loadings[:, np.argsort(-(loadings**2).sum(axis=0), kind="stable")]
    # factor_analyzer's transform() computes the same regression weights, but before our sign / order
    # normalisation; the pseudo-inverse also covers a singular R (fewer models than tasks).
    weights = np.linalg.pinv(corr) @ loadings
    return FactorSolution(
        loadings=loadings,
        communalities=np.asarray(fa.get_communalities(), dtype=float),
        uniquenesses=np.asarray(fa.get_uniquenesses(), dtype=float),
        weights=weights,
        scores=np.asarray(z, dtype=float) @ weights,
        variance=_variance(loadings),
    )


def _variance(loadings: np.ndarray) -> np.ndarray:
    ss = (loadings**2).sum(axis=0)
    share = ss / loadings.shape[0]
    return np.vstack([ss, share, np.cumsum(share)])


def loadings_table(tasks: list[str], solution: FactorSolution) -> pd.DataFrame:
    """One row per task: its loading on each skill, its main skill and communality."""
    names = [f"skill_{k + 1}" for k in range(solution.loadings.shape[1])]
    table = pd.DataFrame(solution.loadings, index=pd.Index(tasks, name="task"), columns=names)
    main = np.argmax(np.abs(solution.loadings), axis=1)
    table["main_skill"] = [names[k] for k in main]
    table["main_loading"] = solution.loadings[np.arange(len(tasks)), main]
    table["communality"] = solution.communalities
    table["uniqueness"] = solution.uniquenesses
    return table
