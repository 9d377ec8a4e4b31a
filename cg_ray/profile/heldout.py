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
    """One split's test half: its scored rows with their cells and groups, and the sums every contrast needs,
    computed once. A contrast's sandwich sums a square over every group of the cells it touches; for the groups
    that sit in one cell (nearly all) that sum has a closed form per cell (`q0`, `q1`, `q2`), so a contrast costs
    O(cells + its own rows + the groups spanning cells), not O(groups)."""

    rows: IntArray  # frame positions, ascending
    scores: FloatArray
    cell: IntArray  # dense cell code per row
    group: IntArray  # dense group code per row
    n_cell: FloatArray
    sum_cell: FloatArray
    counts: sparse.csr_matrix  # groups × cells: rows
    sums: sparse.csr_matrix  # groups × cells: Σ score
    q0: FloatArray  # per cell, over its one-cell groups: Σ n_g²
    q1: FloatArray  # Σ n_g y_g (y_g: the group's Σ score)
    q2: FloatArray  # Σ y_g²
    one_cell_groups: FloatArray  # per cell: how many groups sit in it alone
    spanning_counts: sparse.csr_matrix  # the groups with rows in several cells: their rows of `counts`
    spanning_sums: sparse.csr_matrix  # ... and of `sums`
    # what the Bernoulli floor's shrunk mean is taken over: the scores themselves (None), or, for scores outside
    # [0, 1] (a diff's changes in [-1, 1]), an indicator in [0, 1] per half row (whether the row changed)
    floor_values: FloatArray | None = None

    @classmethod
    def of(
        cls,
        positions: IntArray,
        scores: FloatArray,
        cells: IntArray,
        groups: IntArray,
        floor_values: FloatArray | None = None,
    ) -> HeldOut:
        """`positions`: the half's scored rows (ascending); the other arrays are per frame row."""
        y = scores[positions]
        cell, n_cells = _dense(cells[positions])
        group, n_groups = _dense(groups[positions])
        n_cell = np.bincount(cell, minlength=n_cells).astype(np.float64)
        sum_cell = np.bincount(cell, weights=y, minlength=n_cells).astype(np.float64)
        shape = (n_groups, n_cells)
        counts = sparse.csr_matrix((np.ones(y.size), (group, cell)), shape=shape)
        sums = sparse.csr_matrix((y, (group, cell)), shape=shape)
        counts.sum_duplicates()
        sums.sum_duplicates()
        width = np.diff(counts.indptr)
        one = np.flatnonzero(width == 1)
        home = counts.indices[counts.indptr[one]]
        n_g, y_g = counts.data[counts.indptr[one]], sums.data[counts.indptr[one]]
        per = lambda w: np.bincount(home, weights=w, minlength=n_cells).astype(np.float64)  # noqa: E731
        q0, q1, q2 = per(n_g * n_g), per(n_g * y_g), per(y_g * y_g)
        spanning = np.flatnonzero(width > 1)
        return cls(
            positions,
            y,
            cell,
            group,
            n_cell,
            sum_cell,
            counts,
            sums,
            q0,
            q1,
            q2,
            per(np.ones(one.size)),
            counts[spanning],
            sums[spanning],
            None if floor_values is None else np.asarray(floor_values, dtype=np.float64)[positions],
        )

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
        own_groups, own_at = np.unique(self.group[loc], return_inverse=True)
        if own_groups.size < MIN_CLUSTERS:
            return SplitTest(theta, float("nan"), 0, 1.0, int(loc.size), int(own_groups.size), baseline, dropped)
        # Cluster sums s_g = Σ_own a_i (y_i − in_mean) − Σ_other b_c (y_i − out_mean): first as if every row were
        # an "other" row, base_g = −Σ_c b_c (Y_gc − N_gc out_mean_c), whose squares sum per cell in closed form for
        # one-cell groups (b_c² (q2 − 2 m q1 + m² q0)) and explicitly for groups spanning cells; then the
        # finding's own groups put right: Σ (base + own)² = Σ base² + Σ_own (2 base own + own²).
        m = out_mean[touched]
        per_cell = self.q2[touched] - 2 * m * self.q1[touched] + m * m * self.q0[touched]
        sandwich_sum = float(np.sum(b[touched] ** 2 * per_cell))
        bm = b * out_mean
        if self.spanning_counts.shape[0]:
            base = -(self.spanning_sums @ b - self.spanning_counts @ bm)
            sandwich_sum += float(np.sum(base * base))
        own = np.bincount(own_at, weights=a * (y - in_mean[cell]) + b[cell] * (y - out_mean[cell]))
        own_base = -(self.sums[own_groups] @ b - self.counts[own_groups] @ bm)
        sandwich_sum += float(np.sum(2 * own_base * own + own * own))
        reached = (b > 0).astype(np.float64)
        g = int(np.sum(self.one_cell_groups[touched]))
        if self.spanning_counts.shape[0]:
            g += int(np.count_nonzero(self.spanning_counts @ reached))
        sandwich = g / max(g - 1, 1) * max(sandwich_sum, 0.0)
        y_floor = y if self.floor_values is None else self.floor_values[loc]
        shrunk = (float(w @ y_floor) + 2.0 * total / loc.size) / (total + 4.0 * total / loc.size)
        floor = shrunk * (1.0 - shrunk) * (float(a @ a) + float(b[touched] ** 2 @ n_rest[touched]))
        se = float(np.sqrt(max(sandwich, floor)))
        df = int(own_groups.size) - 1  # the finding's own clusters bound what is known of it
        t = theta / se
        p = float(stats.t.cdf(t, df) if alternative == LESS else stats.t.sf(t, df))
        clusters = int(own_groups.size)
        return SplitTest(theta, se, df, p, int(loc.size), clusters, baseline, dropped, float(np.sqrt(sandwich)))
