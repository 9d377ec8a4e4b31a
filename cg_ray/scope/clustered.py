"""Shares of rows that come in groups (templates, subjects, a user's session): their variance by cluster.

A benchmark's rows are not independent draws: 40 templates × 20 rows are closer to 40 draws than to 800. A
share k / n is then tested and bounded by cluster:

- its variance is the cluster-robust (CR1) variance of a ratio estimator over the groups,
  G / (G − 1) · Σ_g (k_g − p̂ n_g)² / n²;
- the design effect is that variance over the binomial one (never below 1), and the share's interval is the
  Wilson interval of the *effective* counts k / deff of n / deff rows (Rao & Scott 1981, statsmodels'
  `proportion_confint` on those counts);
- a share seen on no row has no variance to measure: its bound counts each group as one draw (the worst case,
  every row of a group alike), 1 − α^(1/G), and over m concepts shown at once 1 − (α/m)^(1/G).

Rows with no groups (each row its own group) get exactly the binomial figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse
from statsmodels.stats.proportion import proportion_confint

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class GroupedShares:
    """Per column (a concept, a region), the share of rows it holds, its cluster-robust variance and the
    effective number of rows behind it."""

    k: FloatArray  # rows holding it
    n: int  # rows
    n_groups: int
    share: FloatArray
    variance: FloatArray  # CR1 variance of the share (0 where every group holds it equally, e.g. k = 0)
    n_effective: FloatArray  # n / design effect (design effect ≥ 1)
    # the sufficient sums over the groups: Σ k_g², Σ k_g n_g (per column) and Σ n_g² — a scope stores them, so
    # an augment recomputes the same test with its new rows added exactly (`with_added`)
    sum_k2: FloatArray
    sum_kn: FloatArray
    sum_n2: float

    @classmethod
    def from_sums(
        cls, k: npt.ArrayLike, n: int, n_groups: int, sum_k2: npt.ArrayLike, sum_kn: npt.ArrayLike, sum_n2: float
    ) -> GroupedShares:
        kk = np.asarray(k, dtype=np.float64)
        k2, kn = np.asarray(sum_k2, dtype=np.float64), np.asarray(sum_kn, dtype=np.float64)
        p = kk / n
        g = int(n_groups)
        if g > 1:
            ss = np.maximum(k2 - 2 * p * kn + p**2 * float(sum_n2), 0.0)
            variance = g / (g - 1) * ss / n**2
        else:
            variance = np.full(p.shape, np.inf)
        binomial = p * (1 - p) / n
        with np.errstate(divide="ignore", invalid="ignore"):
            deff = np.where(binomial > 0, variance / binomial, 1.0)
        # deff lies between 1 (independent rows) and n / G (every row of a group alike)
        deff = np.clip(np.nan_to_num(deff, nan=1.0, posinf=float(n)), 1.0, float(n) / max(g, 1))
        return cls(kk, int(n), g, p, variance, n / deff, k2, kn, float(sum_n2))

    @classmethod
    def independent(cls, k: npt.ArrayLike, n: int) -> GroupedShares:
        """Counts of rows that are each their own group: the binomial figures (CR1 of singletons)."""
        kk = np.asarray(k, dtype=np.float64)
        return cls.from_sums(kk, n, n, kk, kk, float(n))

    def with_added(self, k: npt.ArrayLike, rows: int) -> GroupedShares:
        """These shares with `rows` new rows, each its own group, `k` of them holding each column (an
        augment's kept items)."""
        a = np.asarray(k, dtype=np.float64)
        return GroupedShares.from_sums(
            self.k + a, self.n + rows, self.n_groups + rows, self.sum_k2 + a, self.sum_kn + a, self.sum_n2 + rows
        )

    def interval(self, confidence: float) -> tuple[FloatArray, FloatArray]:
        """Two-sided Wilson interval of the effective counts; a share of 0 gets the groups' bound at the same
        one-sided level (`missing_bound`)."""
        k_eff = self.share * self.n_effective
        low, high = proportion_confint(k_eff, self.n_effective, alpha=1.0 - confidence, method="wilson")
        high = np.where(self.k == 0, missing_bound(self.n_groups, 1.0 - (1.0 - confidence) / 2), high)
        return np.clip(np.asarray(low, np.float64), 0, 1), np.clip(np.asarray(high, np.float64), 0, 1)


def group_codes(groups: npt.ArrayLike) -> tuple[IntArray, int]:
    """Dense codes 0..G−1 of any per-row group labels."""
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    codes = codes.astype(np.int64)
    return codes, int(codes.max()) + 1 if codes.size else 0


def grouped_shares(holds: npt.ArrayLike | sparse.spmatrix, groups: npt.ArrayLike) -> GroupedShares:
    """`holds`: rows × columns (dense or scipy sparse, or one dense column) of 0/1 (or weights in [0, 1]);
    `groups`: a label per row. Sparse input stays sparse: Σ_g (k_g − p n_g)² is expanded into
    Σ k_g² − 2p Σ k_g n_g + p² Σ n_g² (`from_sums`), so a suite's groups × concepts counts are never dense."""
    codes, g = group_codes(groups)
    if sparse.issparse(holds):
        x = sparse.csr_matrix(holds, dtype=np.float64)
    else:
        dense = np.asarray(holds, dtype=np.float64)
        x = sparse.csr_matrix(dense[:, None] if dense.ndim == 1 else dense)
    n = x.shape[0]
    if n == 0:
        raise ValueError("no rows")
    if codes.size != n:
        raise ValueError(f"{codes.size} group labels for {n} rows")
    member = sparse.csr_matrix((np.ones(n), (codes, np.arange(n))), shape=(g, n))
    k_g = (member @ x).tocsc()  # groups × columns
    n_g = np.bincount(codes, minlength=g).astype(np.float64)
    k = np.asarray(k_g.sum(axis=0)).ravel()
    sum_k2 = np.asarray(k_g.multiply(k_g).sum(axis=0)).ravel()
    sum_kn = np.asarray(k_g.T @ n_g).ravel()
    return GroupedShares.from_sums(k, int(n), g, sum_k2, sum_kn, float(n_g @ n_g))


def missing_bound(n_groups: int | IntArray, confidence: float = 0.95, shown: int = 1) -> FloatArray:
    """Upper bound on a share seen on no row of `n_groups` groups, simultaneous over `shown` concepts
    (Bonferroni): 1 − (α / shown)^(1/G). With one row a group this is the exact binomial bound."""
    g = np.maximum(np.asarray(n_groups, dtype=np.float64), 1.0)
    alpha = (1.0 - confidence) / max(shown, 1)
    return np.asarray(1.0 - np.power(alpha, 1.0 / g), dtype=np.float64)
