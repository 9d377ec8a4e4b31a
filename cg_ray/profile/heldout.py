"""Held-out tests of findings and how the folds' verdicts are combined (issue #31, docs/trust.md).

A finding (a failure mode, a slice, a concept) is chosen on K−1 folds of grouped rows and measured on the
held-out fold (`crossfit.py`). There it gets a one-sided test of "its rows score below (or above) the other
rows of their metadata cells, in this fold": a stratified two-sample contrast (`HeldOutFold.contrast`) with a
cluster-robust (CR1 sandwich) variance over the row groups, so four answers to one question count as one
cluster, and Student's t. Both sides of the contrast are held-out rows of the same fold: a baseline estimated
on other rows (the training folds' cell means) would share its noise across every candidate of the fold and
let them pass together — with two folds, 8 of 20 global-null suites confirmed something that way.

The K folds do not see the same candidates, and a finding chosen in several folds was chosen on rows that
other folds hold out, so pooling its held-out rows would bring the selection back (chosen in every fold, the
pool is the whole sample). Instead each fold's figures stand alone and are combined as the multi-split method
of Meinshausen, Meier & Bühlmann (JASA 2009) combines p-values: the folds' empirical γ-quantile over γ, a fold
that did not choose the finding counting as 1 — valid under any dependence between folds (`confirming_share`:
both halves with two folds, the median with more). Benjamini–Hochberg runs within each fold over every
candidate that fold tested, and the folds' q-values are combined the same way (their FDR rule). The estimate
and interval shown are those of the fold at that quantile, each fold's interval at level 1 − α/K so that the
one shown covers at 1 − α whichever fold it is (union bound).
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
    """One finding on one held-out fold: the contrast of its rows with the same cells' other rows."""

    estimate: float
    low: float
    high: float
    p_value: float
    n_rows: int
    n_clusters: int
    baseline: float = float("nan")  # the mean the finding's rows were compared with (its cells' other rows)
    clear: bool = False  # the interval lies wholly on the tested side of no difference


def _dense(codes: IntArray) -> tuple[IntArray, int]:
    uniq, inverse = np.unique(codes, return_inverse=True)
    return inverse.astype(np.int64), int(uniq.size)


@dataclass(frozen=True)
class HeldOutFold:
    """One fold's held-out scored rows, centred within their cells: everything a contrast on the fold needs,
    computed once. A cluster is a (row group, cell) pair: groups rarely span cells, and when one does its
    parts are centred on different means."""

    rows: IntArray  # frame positions, ascending
    scores: FloatArray
    cell: IntArray  # dense cell code per row
    pair: IntArray  # dense (group, cell) code per row
    u: FloatArray  # score − its cell's mean over the fold
    n_cell: FloatArray
    sum_cell: FloatArray
    pair_cell: IntArray  # the cell of each pair
    t_pair: FloatArray  # Σ u per pair
    q_cell: FloatArray  # Σ over the cell's pairs of t_pair²
    pairs_in_cell: FloatArray

    @classmethod
    def of(cls, positions: IntArray, scores: FloatArray, cells: IntArray, groups: IntArray) -> HeldOutFold:
        """`positions`: the fold's scored rows (ascending); the other arrays are per frame row."""
        y = scores[positions]
        cell, n_cells = _dense(cells[positions])
        pair, n_pairs = _dense(groups[positions] * (int(cells.max()) + 1) + cells[positions])
        n_cell = np.bincount(cell, minlength=n_cells).astype(np.float64)
        sum_cell = np.bincount(cell, weights=y, minlength=n_cells).astype(np.float64)
        u = y - (sum_cell / n_cell)[cell]
        pair_cell = np.zeros(n_pairs, dtype=np.int64)
        pair_cell[pair] = cell
        t_pair = np.bincount(pair, weights=u, minlength=n_pairs).astype(np.float64)
        q_cell = np.bincount(pair_cell, weights=t_pair**2, minlength=n_cells).astype(np.float64)
        pairs_in_cell = np.bincount(pair_cell, minlength=n_cells).astype(np.float64)
        return cls(positions, y, cell, pair, u, n_cell, sum_cell, pair_cell, t_pair, q_cell, pairs_in_cell)

    def contrast(
        self,
        positions: IntArray,
        weights: FloatArray | None = None,
        alternative: Alternative = "less",
        confidence: float = 0.975,
    ) -> FoldTest:
        """The finding's held-out rows (of `positions`, weighted: s̃ for a concept, 1 for a mode or a slice)
        against the fold's other rows of the same cells, each cell weighing as it does in the finding:
        θ = Σ a_i m_i, a_i = w_i / Σw on its rows and −(its weight in the cell) / (the cell's other rows) on
        those. Under the null (scores exchangeable within cells) E θ = 0 exactly, whatever the cells' means,
        and no baseline estimated on other rows shares its noise across the fold's candidates. Variance: CR1
        sandwich over (group, cell) clusters of a_i (m_i − the cell's mean), floored by a Bernoulli variance
        with the (Agresti–Coull-shrunk) mean, so a finding whose rows all fail is never certain."""
        pos = np.asarray(positions, dtype=np.int64)
        loc = np.searchsorted(self.rows, pos)
        hit = loc < self.rows.size
        hit[hit] = self.rows[loc[hit]] == pos[hit]
        loc = loc[hit]
        w = np.ones(loc.size) if weights is None else np.asarray(weights, dtype=np.float64)[hit]
        cell = self.cell[loc]
        n_in = np.bincount(cell, minlength=self.n_cell.size).astype(np.float64)
        n_rest = self.n_cell - n_in
        ok = n_rest[cell] > 0  # a cell the finding fills has nothing to be compared with
        loc, w, cell = loc[ok], w[ok], cell[ok]
        total = float(w.sum())
        if loc.size == 0 or total <= 0:
            return FoldTest(float("nan"), -1.0, 1.0, 1.0, 0, 0)
        a = w / total
        w_cell = np.bincount(cell, weights=a, minlength=self.n_cell.size)
        touched = np.flatnonzero(w_cell > 0)
        b = np.zeros(self.n_cell.size)
        b[touched] = w_cell[touched] / n_rest[touched]
        y = self.scores[loc]
        in_sum = np.bincount(cell, weights=y, minlength=self.n_cell.size)
        baseline = float(b[touched] @ (self.sum_cell[touched] - in_sum[touched]))
        theta = float(a @ y) - baseline
        pairs, inverse = np.unique(self.pair[loc], return_inverse=True)
        g_own = pairs.size
        if g_own < MIN_CLUSTERS:
            return FoldTest(theta, -1.0, 1.0, 1.0, int(loc.size), int(g_own), baseline)
        # Cluster sums: the finding's pairs carry a_i u_i and −b (their other rows' Σ u); every other pair of
        # a touched cell carries −b Σ u, summed in closed form from the fold's per-cell totals.
        u = self.u[loc]
        own_au = np.bincount(inverse, weights=a * u, minlength=g_own)
        own_u = np.bincount(inverse, weights=u, minlength=g_own)
        b_pair = b[self.pair_cell[pairs]]
        s_own = own_au - b_pair * (self.t_pair[pairs] - own_u)
        sandwich_sum = float(b[touched] ** 2 @ self.q_cell[touched])
        sandwich_sum += float(s_own @ s_own - (b_pair * self.t_pair[pairs]) @ (b_pair * self.t_pair[pairs]))
        g = int(self.pairs_in_cell[touched].sum())
        sandwich = g / (g - 1) * max(sandwich_sum, 0.0)
        shrunk = (float(w @ y) + 2.0 * total / loc.size) / (total + 4.0 * total / loc.size)
        floor = shrunk * (1.0 - shrunk) * (float(a @ a) + float(b[touched] ** 2 @ n_rest[touched]))
        se = float(np.sqrt(max(sandwich, floor)))
        df = g_own - 1  # the finding's own clusters bound what is known of it
        t = theta / se
        p = float(stats.t.cdf(t, df) if alternative == "less" else stats.t.sf(t, df))
        half = float(stats.t.ppf(0.5 + confidence / 2.0, df)) * se
        low, high = theta - half, theta + half
        clear = high < 0 if alternative == "less" else low > 0
        return FoldTest(theta, low, high, p, int(loc.size), int(g_own), baseline, clear)


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
    baseline: float | None = None  # what the shown estimate was compared with (the deciding fold's)


def confirming_share(folds: int) -> float:
    """Meinshausen's γ: the share of folds whose figures decide. Two folds: both (γ = 1, q = the larger of the
    two, no factor) — each half tests on half the rows, so this keeps more power than any rule on smaller
    folds, and a false finding must pass twice. More folds: the median (γ = 1/2, q = twice the median)."""
    return 1.0 if folds == 2 else 0.5


def combine(
    tests: dict[int, tuple[FoldTest, float]], folds: int, fdr: float, bounds: tuple[float, float] = (-1.0, 1.0)
) -> Verdict:
    """The verdict from fold → (its held-out test, its BH q-value) over the folds that chose the finding.

    p and q are Meinshausen's γ-quantile rule (`confirming_share`): the folds' empirical γ-quantile over γ. The
    estimate and interval are those of the fold that sets q — its test at level 1 − α/K, so by the union bound
    the one reported covers at 1 − α whichever fold it is. Confirmed: q ≤ fdr and that interval excludes no
    difference (at the margin the two could disagree; a user should never see both)."""
    q = np.ones(folds)
    p = np.ones(folds)
    for fold, (t, qv) in tests.items():
        q[fold], p[fold] = qv, t.p_value
    gamma = confirming_share(folds)
    at = int(np.ceil(gamma * folds)) - 1  # the empirical γ-quantile: inf{x : F(x) ≥ γ}
    deciding = int(np.argsort(q, kind="stable")[at])
    q_agg = min(1.0, float(q[deciding]) / gamma)
    p_agg = min(1.0, float(np.sort(p)[at]) / gamma)
    if deciding not in tests:
        # Too few folds chose it: no held-out figure stands for it. (Its best fold's interval, uncorrected for
        # the candidates tried, could sit below 0 beside "not confirmed" — the confusion this judgement ends.)
        return Verdict(None, None, None, p_agg, q_agg, False, len(tests), 0, 0)
    t = tests[deciding][0]

    def clip(x: float) -> float | None:  # a score's mean (or a residual) stays in its range
        return float(np.clip(x, bounds[0], bounds[1])) if np.isfinite(x) else None

    return Verdict(
        clip(t.estimate),
        clip(t.low),
        clip(t.high),
        p_agg,
        q_agg,
        q_agg <= fdr and t.clear,  # never "confirmed" beside an interval that holds no difference
        len(tests),
        t.n_rows,
        t.n_clusters,
        float(t.baseline) if np.isfinite(t.baseline) else None,
    )


def not_tested() -> Verdict:
    return Verdict(None, None, None, 1.0, 1.0, False, 0, 0, 0)
