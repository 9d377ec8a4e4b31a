"""SAE model diffing: which concepts one model's answers contain more often than another's, on the same
prompts, with intervals, hypotheses formed on one half of the prompts and checked on the other.

Per concept c and prompt i, a_ic = [s̃_c(A's response i) > threshold] and b_ic likewise for B (s̃ pooled
over the response tokens only). The fractions f_A(c) = mean_i a_ic and f_B(c) = mean_i b_ic are paired
proportions (the same prompts), Δ(c) = f_B(c) − f_A(c) (B − A, as in `cg-ray diff`).

Interval: Newcombe's hybrid score interval for the difference of *paired* proportions (Newcombe 1998,
"Improved confidence intervals for the difference between binomial proportions based on paired data",
Stat Med 17:2635–2650, method 10): the Wilson score intervals of f_A and f_B (statsmodels'
`proportion_confint(method="wilson")`) combined by square-and-add with the continuity-corrected
correlation φ* of the paired 2×2 table. With φ* = 0 it is exactly the independent-samples Newcombe
interval (statsmodels' `confint_proportions_2indep(method="newcomb")`; tested). It behaves at 0 and
small counts, where a bootstrap of a concept active in 3 answers would not, and is closed-form and
vectorised over all concepts. When A and B agree on every prompt (Δ = 0) the interval always covers 0.

Hypotheses, judged as every finding is (docs/findings.md): in each of `splits` seeded random splits of the
prompts, one half forms them — the concepts whose interval there excludes 0 (eligible: active in at least
`min_rows` of that half's answers of A or B), top `top` per direction ranked by the bound nearest 0 — and the
other half tests each: the mean over its prompts of b_ic − a_ic, one-sided in the hypothesis' direction,
Student's t with each prompt a cluster, its variance floored as for a Bernoulli share of prompts where the
two answers differ. Within a split the tries get weighted Benjamini–Hochberg q-values, over the splits their
median × 2 (`profile.decision.judge`): confirmed ⇔ q ≤ fdr, with the interval of that rule (it excludes 0
exactly then) and the MDE. One split's replication (the previous rule) hung on its seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse, stats

from cg_ray.arrays import FloatArray, IntArray
from cg_ray.compare.heldout_diff import in_order
from cg_ray.profile.decision import DECISION, GREATER, INTERVAL, LESS, Alternative, SplitTest, Verdict, judge
from cg_ray.profile.heldout import MIN_OWN_CLUSTERS

DIRECTIONS = ("a_more", "b_more")  # A's answers contain the concept more often / B's do


def wilson(count: IntArray, n: int, confidence: float) -> tuple[FloatArray, FloatArray]:
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(count, n, alpha=1.0 - confidence, method="wilson")
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def newcombe_paired(
    both: IntArray, only_b: IntArray, only_a: IntArray, n: int, confidence: float = 0.95
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(Δ, low, high) of f_B − f_A from the paired 2×2 counts (arrays over concepts): `both` prompts where
    both answers have the concept, `only_b`, `only_a`; the rest have it in neither."""
    both, only_b, only_a = (np.asarray(x, dtype=np.int64) for x in (both, only_b, only_a))
    neither = n - both - only_b - only_a
    n_b, n_a = both + only_b, both + only_a
    p_b, p_a = n_b / n, n_a / n
    l_b, u_b = wilson(n_b, n, confidence)
    l_a, u_a = wilson(n_a, n, confidence)
    # φ*: the correlation of the paired table, continuity-corrected (0 when a margin is empty).
    margins = (n_b * (n - n_b) * n_a * (n - n_a)).astype(np.float64)
    det = (both * neither - only_b * only_a).astype(np.float64)
    corrected = np.where(det > n / 2, det - n / 2, np.where(det >= 0, 0.0, det))
    phi = np.divide(corrected, np.sqrt(margins), out=np.zeros_like(det), where=margins > 0)
    delta = p_b - p_a
    d_low = np.sqrt(np.maximum((p_b - l_b) ** 2 - 2 * phi * (p_b - l_b) * (u_a - p_a) + (u_a - p_a) ** 2, 0.0))
    d_high = np.sqrt(np.maximum((u_b - p_b) ** 2 - 2 * phi * (u_b - p_b) * (p_a - l_a) + (p_a - l_a) ** 2, 0.0))
    return delta, np.maximum(delta - d_low, -1.0), np.minimum(delta + d_high, 1.0)


@dataclass(frozen=True)
class ConceptStats:
    """Per concept (arrays of length d_sae) on a set of n paired prompts."""

    n: int
    active_a: IntArray
    active_b: IntArray
    both: IntArray
    delta: FloatArray  # f_B − f_A
    low: FloatArray
    high: FloatArray

    @property
    def frac_a(self) -> FloatArray:
        return self.active_a / max(self.n, 1)

    @property
    def frac_b(self) -> FloatArray:
        return self.active_b / max(self.n, 1)

    def either(self) -> IntArray:
        return self.active_a + self.active_b - self.both


def concept_stats(
    active_a: sparse.csr_matrix, active_b: sparse.csr_matrix, rows: IntArray, confidence: float
) -> ConceptStats:
    """Counts and Newcombe intervals for every concept over the prompts `rows` (boolean n × d matrices)."""
    a, b = active_a[rows], active_b[rows]
    n = len(rows)
    n_a = np.asarray(a.sum(axis=0), dtype=np.int64).ravel()
    n_b = np.asarray(b.sum(axis=0), dtype=np.int64).ravel()
    both = np.asarray(a.multiply(b).sum(axis=0), dtype=np.int64).ravel()
    if n == 0:
        zeros = np.zeros(a.shape[1])
        return ConceptStats(0, n_a, n_b, both, zeros, zeros.copy(), zeros.copy())
    delta, low, high = newcombe_paired(both, n_b - both, n_a - both, n, confidence)
    return ConceptStats(n, n_a, n_b, both, delta, low, high)


def rank_hypotheses(stats: ConceptStats, min_rows: int, top: int) -> dict[str, IntArray]:
    """Concept ids per direction whose interval excludes 0, most confident first (the bound nearest 0)."""
    eligible = np.maximum(stats.active_a, stats.active_b) >= min_rows
    out: dict[str, IntArray] = {}
    a_more = np.flatnonzero(eligible & (stats.high < 0))
    out["a_more"] = a_more[np.lexsort((a_more, stats.high[a_more]))][:top]
    b_more = np.flatnonzero(eligible & (stats.low > 0))
    out["b_more"] = b_more[np.lexsort((b_more, -stats.low[b_more]))][:top]
    return out


def split_halves(n: int, seed: int) -> tuple[IntArray, IntArray]:
    """A seeded random split of prompt positions into a forming half and a testing half (sorted)."""
    order = np.random.default_rng(seed).permutation(n)
    half = n // 2
    return np.sort(order[: n - half]).astype(np.int64), np.sort(order[n - half :]).astype(np.int64)


SIDES: dict[str, Alternative] = {"a_more": LESS, "b_more": GREATER}  # Δ = f_B − f_A below / above 0


def paired_test(change: FloatArray, side: Alternative) -> SplitTest:
    """The mean of b_ic − a_ic over a half's prompts against 0, one-sided; each prompt a cluster."""
    n = int(change.size)
    estimate = float(change.mean()) if n else float("nan")
    if n < MIN_OWN_CLUSTERS:
        return SplitTest(estimate, float("nan"), 0, 1.0, n, n, 0.0)
    variance = float(np.sum((change - estimate) ** 2)) / (n - 1) / n
    differ = (float(np.abs(change).sum()) + 2.0) / (n + 4.0)  # Agresti–Coull-shrunk share of differing answers
    se = math.sqrt(max(variance, differ * (1.0 - differ) / n))
    t = estimate / se
    p = float(stats.t.cdf(t, n - 1) if side == LESS else stats.t.sf(t, n - 1))
    return SplitTest(estimate, se, n - 1, p, n, n, 0.0)


@dataclass(frozen=True)
class Confirmation:
    """Per direction, every concept a split formed as a hypothesis, with its verdict: confirmed first."""

    judged: dict[str, list[tuple[int, Verdict]]]
    splits: int
    fdr: float
    tested_per_split: int

    def counts(self) -> dict[str, Any]:
        """hypotheses.json's `confirmation`."""
        return {
            "splits": self.splits,
            "fdr": self.fdr,
            "tested_per_split": self.tested_per_split,
            "decision": DECISION,
            "interval": INTERVAL,
            "formed": {d: len(v) for d, v in self.judged.items()},
            "confirmed": {d: sum(x.confirmed for _, x in v) for d, v in self.judged.items()},
        }


def confirm(
    active_a: sparse.csr_matrix,
    active_b: sparse.csr_matrix,
    *,
    seed: int,
    splits: int,
    fdr: float,
    confidence: float,
    min_rows: int,
    top: int,
) -> Confirmation:
    """Form hypotheses on one half of the prompts and test them on the other, over `splits` splits."""
    per_split: dict[str, list[list[tuple[int, SplitTest, int]]]] = {d: [] for d in DIRECTIONS}
    a_csc, b_csc = active_a.tocsc(), active_b.tocsc()
    for s in range(splits):
        forming, testing = split_halves(active_a.shape[0], seed + s)
        formed = rank_hypotheses(concept_stats(active_a, active_b, forming, confidence), min_rows, top)
        for direction, side in SIDES.items():
            tried = []
            for rank, c in enumerate(formed[direction].tolist(), start=1):
                change = b_csc[testing, c].toarray().ravel() - a_csc[testing, c].toarray().ravel()
                tried.append((int(c), paired_test(change, side), rank))
            per_split[direction].append(tried)
    judged = {d: in_order(judge(per_split[d], splits, fdr, (-1.0, 1.0)), SIDES[d]) for d in DIRECTIONS}
    return Confirmation(judged, splits, fdr, top)


def active_matrix(
    concept_ids: list[npt.NDArray[np.int32]],
    concept_acts: list[npt.NDArray[np.float32]],
    d_sae: int,
    threshold: float = 0.0,
) -> sparse.csr_matrix:
    """Rows of sparse s̃ → an n × d_sae CSR of activations (entries ≤ threshold dropped)."""
    lengths = np.fromiter((len(ids) for ids in concept_ids), dtype=np.int64, count=len(concept_ids))
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    cols = np.concatenate(concept_ids).astype(np.int64) if lengths.sum() else np.zeros(0, np.int64)
    vals = np.concatenate(concept_acts).astype(np.float64) if lengths.sum() else np.zeros(0)
    m = sparse.csr_matrix((vals, cols, indptr), shape=(len(concept_ids), d_sae))
    m.data[m.data <= threshold] = 0.0
    m.eliminate_zeros()
    return m


def as_active(acts: sparse.csr_matrix) -> sparse.csr_matrix:
    out = acts.copy()
    out.data = np.ones_like(out.data)
    return out
