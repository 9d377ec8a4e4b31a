"""The held-out test of one rule on one split's test half (docs/findings.md).

A finding's rule picks rows; on the test half its rows are compared with the other rows of the same metadata
cells, each cell weighing as it does in the finding: a stratified two-sample contrast

    θ = Σ_c π_c (mean of its rows in c − mean of the other rows in c),   π_c = its weight in cell c,

one-sided, with a CR1 sandwich variance over the row groups (four answers to one question, or one template
written out in several cells, are one cluster wherever their rows sit) and Student's t on the finding's own
clusters − 1. The residuals of the sandwich are those of the saturated cell × finding model, so the variance
is that of statsmodels' cluster-robust OLS of the score on the cell × finding means (tests compare the two).
Floored by a Bernoulli variance with the Agresti–Coull-shrunk mean, so a finding whose rows all fail is never
certain; fewer than `MIN_OWN_CLUSTERS` clusters of its own, no test. Rows of the finding in a cell it fills (no
other row there to compare with) are left out and counted (`SplitTest.n_dropped`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse, stats

from cg_ray.arrays import BoolArray, FloatArray, IntArray
from cg_ray.profile.decision import LESS, Alternative, SplitTest

MIN_OWN_CLUSTERS = 5  # fewer of the finding's own clusters than this: no test (p = 1); a sandwich on 2–4 is noise


Codes = npt.NDArray[np.signedinteger[Any]]  # int32 where the values fit (`_compact`), else int64


def _dense(codes: IntArray) -> tuple[Codes, int]:
    uniq, inverse = np.unique(codes, return_inverse=True)
    return _compact(inverse.reshape(-1)), int(uniq.size)


def _compact(codes: npt.NDArray[np.integer]) -> Codes:
    """Row indices and codes as int32 where they fit: ten splits keep two test halves each (peak RSS)."""
    fits = codes.size == 0 or int(codes.max()) < np.iinfo(np.int32).max
    out: Codes = codes.astype(np.int32 if fits else np.int64, copy=False)
    return out


@dataclass(frozen=True)
class HeldOut:
    """One split's test half: its scored rows with their cells and groups, and the sums every contrast needs,
    computed once. A contrast's sandwich sums a square over every group of the cells it touches; for the groups
    that sit in one cell (nearly all) that sum has a closed form per cell (`q0`, `q1`, `q2`), so a contrast costs
    O(cells + its own rows + the groups spanning cells), not O(groups). Per group only its cell, rows and Σ
    score are kept (a group spanning cells: its row of the spanning matrices), not a groups × cells matrix."""

    rows: Codes  # frame positions, ascending
    scores: FloatArray
    cell: Codes  # dense cell code per row
    group: Codes  # dense group code per row
    n_cell: FloatArray
    sum_cell: FloatArray
    home: Codes  # per group: its one cell, or -1 when it spans several
    group_n: FloatArray  # per group: its rows
    group_y: FloatArray  # per group: Σ score
    q0: FloatArray  # per cell, over its one-cell groups: Σ n_g²
    q1: FloatArray  # Σ n_g y_g (y_g: the group's Σ score)
    q2: FloatArray  # Σ y_g²
    one_cell_groups: FloatArray  # per cell: how many groups sit in it alone
    spanning: Codes  # the groups with rows in several cells, ascending
    spanning_counts: sparse.csr_matrix  # their rows per cell
    spanning_sums: sparse.csr_matrix  # ... and Σ score per cell
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
        cell, _ = _dense(cells[positions])
        group, _ = _dense(groups[positions])
        floor = None if floor_values is None else np.asarray(floor_values, dtype=np.float64)[positions]
        return cls._build(_compact(np.asarray(positions)), y, cell, group, floor)

    def one_cell(self) -> HeldOut:
        """The same half as one cell (a slice against the half's other rows), sharing its row arrays."""
        zeros = np.zeros(self.rows.size, dtype=np.int32)  # never written: the OS's zero pages, no memory
        return HeldOut._build(self.rows, self.scores, zeros, self.group, self.floor_values)

    @classmethod
    def _build(cls, rows: Codes, y: FloatArray, cell: Codes, group: Codes, floor: FloatArray | None) -> HeldOut:
        n_cells = int(cell.max(initial=-1)) + 1
        n_groups = int(group.max(initial=-1)) + 1
        n_cell = np.bincount(cell, minlength=n_cells).astype(np.float64)
        sum_cell = np.bincount(cell, weights=y, minlength=n_cells).astype(np.float64)
        group_n = np.bincount(group, minlength=n_groups).astype(np.float64)
        group_y = np.bincount(group, weights=y, minlength=n_groups).astype(np.float64)
        # a group's cell when it has one: its (group, cell) pairs, and the groups with a single pair
        pairs = np.unique(group.astype(np.int64) * max(n_cells, 1) + cell)
        pair_group, pair_cell = np.divmod(pairs, max(n_cells, 1))
        single = np.bincount(pair_group, minlength=n_groups)[pair_group] == 1
        home = np.full(n_groups, -1, dtype=np.int32)
        home[pair_group[single]] = pair_cell[single]
        one = home >= 0
        per = lambda w: np.bincount(home[one], weights=w, minlength=n_cells).astype(np.float64)  # noqa: E731
        n_g, y_g = group_n[one], group_y[one]
        spanning = np.flatnonzero(~one)
        in_span = np.isin(group, spanning)
        span_row = np.searchsorted(spanning, group[in_span])
        shape = (spanning.size, n_cells)
        counts = sparse.csr_matrix((np.ones(span_row.size), (span_row, cell[in_span])), shape=shape)
        sums = sparse.csr_matrix((y[in_span], (span_row, cell[in_span])), shape=shape)
        counts.sum_duplicates()
        sums.sum_duplicates()
        return cls(
            rows,
            y,
            cell,
            group,
            n_cell,
            sum_cell,
            home,
            group_n,
            group_y,
            per(n_g * n_g),
            per(n_g * y_g),
            per(y_g * y_g),
            per(np.ones(n_g.size)),
            _compact(spanning),
            counts,
            sums,
            floor,
        )

    @property
    def n_groups(self) -> int:
        return int(self.home.size)

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
        if own_groups.size < MIN_OWN_CLUSTERS:
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
        own_base = self._base(own_groups, b, bm)
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

    def _base(self, groups: Codes, b: FloatArray, bm: FloatArray) -> FloatArray:
        """−Σ_c b_c (Y_gc − N_gc out_mean_c) of `groups`: from their cell for one-cell groups, else from their
        rows of the spanning matrices."""
        home = self.home[groups]
        one = home >= 0
        base = np.empty(groups.size)
        base[one] = -(self.group_y[groups[one]] * b[home[one]] - self.group_n[groups[one]] * bm[home[one]])
        if not one.all():
            at = np.searchsorted(self.spanning, groups[~one])
            base[~one] = -(self.spanning_sums[at] @ b - self.spanning_counts[at] @ bm)
        return base
