"""Held-out tests of findings and how the folds' verdicts are combined (issue #31, docs/trust.md).

A finding (a failure mode, a slice, a concept) is chosen on K−1 folds of grouped rows and measured on the
held-out fold (`crossfit.py`). On that fold it gets a one-sided test of "its rows score below (or above) what
they should": the weighted mean θ of r = m − e over its held-out scored rows (m the score, e what the row's
cell predicts from the *other* folds), with a cluster-robust (CR1 sandwich) standard error over the row groups,
so four answers to one question count as one cluster, and Student's t with G − 1 degrees of freedom. The
sandwich variance is floored by that of a Bernoulli score with the (Agresti–Coull-shrunk) mean over the
effective number of clusters: scores are in [0, 1], so a group whose held-out rows all fail is never certain.

The K folds do not see the same candidates, and a finding chosen in several folds was chosen on rows that
other folds hold out, so pooling its held-out rows would bring the selection back (chosen in every fold, the
pool is the whole sample). Instead each fold's figures stand alone and are combined by their median, as the
multi-split method of Meinshausen, Meier & Bühlmann (JASA 2009) does for p-values: p = min(1, 2 × median of
the folds' p-values), a fold that did not choose the finding counting as p = 1; valid under any dependence
between folds. Benjamini–Hochberg runs within each fold over every candidate that fold tested, and the
folds' q-values are combined the same way (their FDR rule). The estimate is the median over the folds that
chose it; the interval is the median of the folds' bounds at level 1 − α/2 (a fold that did not choose it
counts as the whole range), which keeps at least 1 − α coverage (Chernozhukov, Demirer, Duflo & Fernández-Val,
"Generic machine learning inference", 2018–2023).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats
from statsmodels.stats.multitest import multipletests

Alternative = Literal["less", "greater"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MIN_CLUSTERS = 5  # fewer held-out clusters than this: no test (p = 1); a sandwich on 2–4 clusters is noise


@dataclass(frozen=True)
class FoldTest:
    """One finding on one held-out fold."""

    estimate: float
    low: float
    high: float
    p_value: float
    n_rows: int
    n_clusters: int


def cluster_test(
    scores: FloatArray,
    expected: FloatArray,
    clusters: IntArray,
    weights: FloatArray | None = None,
    alternative: Alternative = "less",
    confidence: float = 0.975,
) -> FoldTest:
    """Weighted mean of scores − expected with a cluster-robust interval and a one-sided p-value.

    All arrays are over the finding's held-out scored rows. `weights` default to 1 (a row counts once); for a
    concept they are its activations s̃, as in the residual gap."""
    n = int(scores.size)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    total = float(w.sum())
    if n == 0 or total <= 0:
        return FoldTest(float("nan"), -1.0, 1.0, 1.0, n, 0)
    r = scores - expected
    theta = float(w @ r) / total
    _, cl = np.unique(clusters, return_inverse=True)
    g = int(cl.max()) + 1
    if g < MIN_CLUSTERS:
        return FoldTest(theta, -1.0, 1.0, 1.0, n, g)
    u = np.bincount(cl, weights=w * (r - theta), minlength=g)
    sandwich = g / (g - 1) * float(u @ u) / total**2
    # The floor: a Bernoulli score's variance over the effective number of clusters (by weight).
    wg = np.bincount(cl, weights=w, minlength=g)
    g_eff = total**2 / float(wg @ wg)
    shrunk = (float(w @ scores) + 2.0 * total / n) / (total + 4.0 * total / n)
    se = float(np.sqrt(max(sandwich, shrunk * (1.0 - shrunk) / g_eff)))
    df = g - 1
    t = theta / se
    p = float(stats.t.cdf(t, df) if alternative == "less" else stats.t.sf(t, df))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, df)) * se
    return FoldTest(theta, theta - half, theta + half, p, n, g)


def rank_weights(ranks: npt.NDArray[np.integer]) -> FloatArray:
    """BH weights from the candidates' training ranks (1 = the best): ∝ 1/rank, mean 1. The ranks come from the
    other folds, so the weights are fixed before the held-out rows are looked at."""
    w = 1.0 / np.asarray(ranks, dtype=np.float64)
    out: FloatArray = w / w.mean() if w.size else w
    return out


def fold_q_values(p_values: FloatArray, ranks: npt.NDArray[np.integer] | None = None) -> FloatArray:
    """Benjamini–Hochberg q-values of one fold's candidates (statsmodels), weighted by their training ranks
    when given (weighted BH, Genovese, Roeder & Wasserman 2006: p / w into BH, weights of mean 1 fixed
    independently of these p-values, so the FDR stays controlled). Unweighted, the best-ranked candidate of
    50 pays ×50; weighted, ×H(50) ≈ 4.5, and the tail pays more, which is where the noise is."""
    if p_values.size == 0:
        return p_values.astype(np.float64)
    p = np.asarray(p_values, dtype=np.float64)
    if ranks is not None:
        p = np.minimum(1.0, p / rank_weights(ranks))
    q: FloatArray = multipletests(p, method="fdr_bh")[1]
    return q


@dataclass(frozen=True)
class Verdict:
    """A finding's figures combined over the K folds (None where no fold chose it)."""

    estimate: float | None
    low: float | None
    high: float | None
    p_value: float
    q_value: float
    confirmed: bool
    folds_selected: int
    n_heldout: int
    n_clusters: int


def combine(
    tests: dict[int, tuple[FoldTest, float]], folds: int, fdr: float, bounds: tuple[float, float] = (-1.0, 1.0)
) -> Verdict:
    """The verdict from fold → (its held-out test, its BH q-value) over the folds that chose the finding."""
    p = np.ones(folds)
    q = np.ones(folds)
    lows = np.full(folds, bounds[0])
    highs = np.full(folds, bounds[1])
    estimates = []
    n_rows = n_clusters = 0
    for fold, (t, qv) in tests.items():
        p[fold], q[fold], lows[fold], highs[fold] = t.p_value, qv, t.low, t.high
        if np.isfinite(t.estimate):
            estimates.append(t.estimate)
        n_rows += t.n_rows
        n_clusters += t.n_clusters
    # The upper median for p and q, the outer medians for the bounds: conservative when K is even.
    p_agg = min(1.0, 2.0 * float(np.quantile(p, 0.5, method="higher")))
    q_agg = min(1.0, 2.0 * float(np.quantile(q, 0.5, method="higher")))
    clip = lambda x: float(np.clip(x, bounds[0], bounds[1]))  # noqa: E731 - a score's mean stays in its range
    return Verdict(
        clip(np.median(estimates)) if estimates else None,
        clip(np.quantile(lows, 0.5, method="lower")) if tests else None,
        clip(np.quantile(highs, 0.5, method="higher")) if tests else None,
        p_agg,
        q_agg,
        q_agg <= fdr,
        len(tests),
        n_rows,
        n_clusters,
    )


def not_tested() -> Verdict:
    return Verdict(None, None, None, 1.0, 1.0, False, 0, 0, 0)
