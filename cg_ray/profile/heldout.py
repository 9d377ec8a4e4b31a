"""The held-out test of one rule on one split's test half (docs/findings.md).

A finding's rule picks rows; on the test half its rows are compared with the other rows of the same metadata
cells, each cell weighing as it does in the finding: a stratified two-sample contrast

    θ = Σ_c π_c (mean of its rows in c − mean of the other rows in c),   π_c = its weight in cell c,

one-sided, with a CR1 sandwich variance over the row groups (four answers to one question, or one template
written out in several cells, are one cluster wherever their rows sit) and Student's t on the finding's own
clusters − 1. The residuals of the sandwich are those of the saturated cell × finding model, so the variance
is that of statsmodels' cluster-robust OLS of the score on the cell × finding means (tests compare the two).
Floored by a Bernoulli variance with the Agresti–Coull-shrunk mean, so a finding whose rows all fail is never
certain; fewer than `MIN_CLUSTERS` clusters of its own, no test. Rows of the finding in a cell it fills (no
other row there to compare with) are left out and counted (`SplitTest.n_dropped`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse, stats

from cg_ray.arrays import BoolArray, FloatArray, IntArray
from cg_ray.profile.decision import LESS, Alternative, SplitTest

MIN_CLUSTERS = 5  # fewer of the finding's own clusters than this: no test (p = 1); a sandwich on 2–4 is noise


def _dense(codes: IntArray) -> tuple[IntArray, int]:
    uniq, inverse = np.unique(codes, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), int(uniq.size)


@dataclass(frozen=True)
class HeldOut:
    """One split's test half: its scored rows with their cells and groups, and the per (group, cell) sums every
    contrast needs, computed once."""

    rows: IntArray  # frame positions, ascending
    scores: FloatArray
    cell: IntArray  # dense cell code per row
    group: IntArray  # dense group code per row
    n_cell: FloatArray
    sum_cell: FloatArray
    counts: sparse.csc_matrix  # groups × cells: rows
    sums: sparse.csc_matrix  # groups × cells: Σ score

    @classmethod
    def of(cls, positions: IntArray, scores: FloatArray, cells: IntArray, groups: IntArray) -> HeldOut:
        """`positions`: the half's scored rows (ascending); the other arrays are per frame row."""
        y = scores[positions]
        cell, n_cells = _dense(cells[positions])
        group, n_groups = _dense(groups[positions])
        n_cell = np.bincount(cell, minlength=n_cells).astype(np.float64)
        sum_cell = np.bincount(cell, weights=y, minlength=n_cells).astype(np.float64)
        shape = (n_groups, n_cells)
        counts = sparse.csc_matrix((np.ones(y.size), (group, cell)), shape=shape)
        sums = sparse.csc_matrix((y, (group, cell)), shape=shape)
        counts.sum_duplicates()
        sums.sum_duplicates()
        return cls(positions, y, cell, group, n_cell, sum_cell, counts, sums)

    @property
    def n_groups(self) -> int:
        return int(self.counts.shape[0])

    def locate(self, positions: IntArray) -> tuple[IntArray, BoolArray]:
        """Indices into the half of those `positions` it holds, and which of `positions` those are."""
        pos = np.asarray(positions, dtype=np.int64)
        loc = np.searchsorted(self.rows, pos)
        hit = loc < self.rows.size
        hit[hit] = self.rows[loc[hit]] == pos[hit]
        return loc[hit], hit

    def contrast(
        self, positions: IntArray, weights: FloatArray | None = None, alternative: Alternative = LESS
    ) -> SplitTest:
        """The rule's rows (of `positions`, weighted: s̃ for a concept, 1 for a mode or a slice) in this half
        against the half's other rows of the same cells (see the module docstring)."""
        loc, hit = self.locate(positions)
        w = np.ones(loc.size) if weights is None else np.asarray(weights, dtype=np.float64)[hit]
        n_cells = self.n_cell.size
        cell = self.cell[loc]
        n_in = np.bincount(cell, minlength=n_cells).astype(np.float64)
        n_rest = self.n_cell - n_in
        ok = n_rest[cell] > 0
        dropped = int(loc.size - ok.sum())
        loc, w, cell = loc[ok], w[ok], cell[ok]
        total = float(w.sum())
        if loc.size == 0 or total <= 0:
            return SplitTest(float("nan"), float("nan"), 0, 1.0, 0, 0, n_dropped=dropped)
        y = self.scores[loc]
        a = w / total
        pi = np.bincount(cell, weights=a, minlength=n_cells)  # the finding's weight in each cell
        touched = np.flatnonzero(pi > 0)
        b = np.zeros(n_cells)
        b[touched] = pi[touched] / n_rest[touched]  # each other row's weight in the contrast
        in_sum = np.bincount(cell, weights=y, minlength=n_cells)
        out_mean = np.zeros(n_cells)
        out_mean[touched] = (self.sum_cell[touched] - in_sum[touched]) / n_rest[touched]
        baseline = float(pi[touched] @ out_mean[touched])
        in_mean = np.zeros(n_cells)
        in_mean[touched] = np.bincount(cell, weights=a * y, minlength=n_cells)[touched] / pi[touched]
        theta = float(a @ y) - baseline
        own_groups = np.unique(self.group[loc])
        if own_groups.size < MIN_CLUSTERS:
            return SplitTest(theta, float("nan"), 0, 1.0, int(loc.size), int(own_groups.size), baseline, dropped)
        # Cluster sums s_g = Σ_own a_i (y_i − in_mean) − Σ_other b_c (y_i − out_mean): every row of a touched
        # cell as if it were an "other" row (one sparse product), then the finding's rows put right.
        cols = touched
        s = -(self.sums[:, cols] @ b[cols]) + self.counts[:, cols] @ (b[cols] * out_mean[cols])
        own = a * (y - in_mean[cell]) + b[cell] * (y - out_mean[cell])
        s += np.bincount(self.group[loc], weights=own, minlength=self.n_groups)
        g = int(np.count_nonzero(self.counts[:, cols].getnnz(axis=1)))
        sandwich = g / max(g - 1, 1) * float(s @ s)
        shrunk = (float(w @ y) + 2.0 * total / loc.size) / (total + 4.0 * total / loc.size)
        floor = shrunk * (1.0 - shrunk) * (float(a @ a) + float(b[cols] ** 2 @ n_rest[cols]))
        se = float(np.sqrt(max(sandwich, floor)))
        df = int(own_groups.size) - 1  # the finding's own clusters bound what is known of it
        t = theta / se
        p = float(stats.t.cdf(t, df) if alternative == LESS else stats.t.sf(t, df))
        clusters = int(own_groups.size)
        return SplitTest(theta, se, df, p, int(loc.size), clusters, baseline, dropped, float(np.sqrt(sandwich)))
