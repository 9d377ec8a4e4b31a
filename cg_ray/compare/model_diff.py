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

Replication: the prompts are split in two halves at random (seeded). Hypotheses are the concepts whose
interval on the discovery half excludes 0 (eligible: active in at least `min_rows` of that half's answers
of A or B), top `top` per direction ranked by the bound nearest 0; a hypothesis replicates when, on the
held-out half, Δ has the same sign and its interval excludes 0. A null concept replicates with
probability ≈ (1 − confidence) / 2, which is reported beside the count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np
import numpy.typing as npt
from scipy import sparse

from cg_ray.arrays import BoolArray, FloatArray, IntArray

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
    """A seeded random split of prompt positions into a discovery half and a held-out half (sorted)."""
    order = np.random.default_rng(seed).permutation(n)
    half = n // 2
    return np.sort(order[: n - half]).astype(np.int64), np.sort(order[n - half :]).astype(np.int64)


class ReplicationCounts(TypedDict):
    """hypotheses.json's `replication`: hypotheses formed on the discovery prompts and held on the others."""

    discovery_prompts: int
    held_out_prompts: int
    formed: dict[str, int]
    replicated: dict[str, int]
    formed_total: int
    replicated_total: int
    expected_by_chance_if_null: float


@dataclass
class Replication:
    discovery: IntArray  # prompt positions
    held_out: IntArray
    found: ConceptStats
    check: ConceptStats
    hypotheses: dict[str, IntArray]  # direction -> concept ids (from the discovery half)
    replicated: dict[str, BoolArray] = field(default_factory=dict)

    def counts(self, confidence: float) -> ReplicationCounts:
        formed = {k: len(v) for k, v in self.hypotheses.items()}
        held = {k: int(v.sum()) for k, v in self.replicated.items()}
        total = sum(formed.values())
        return {
            "discovery_prompts": len(self.discovery),
            "held_out_prompts": len(self.held_out),
            "formed": formed,
            "replicated": held,
            "formed_total": total,
            "replicated_total": sum(held.values()),
            "expected_by_chance_if_null": total * (1.0 - confidence) / 2.0,
        }


def replicate(
    active_a: sparse.csr_matrix,
    active_b: sparse.csr_matrix,
    *,
    seed: int,
    confidence: float,
    min_rows: int,
    top: int,
) -> Replication:
    """Form hypotheses on one half of the prompts and check them on the other."""
    discovery, held_out = split_halves(active_a.shape[0], seed)
    found = concept_stats(active_a, active_b, discovery, confidence)
    check = concept_stats(active_a, active_b, held_out, confidence)
    hypotheses = rank_hypotheses(found, min_rows, top)
    rep = Replication(discovery, held_out, found, check, hypotheses)
    rep.replicated = {
        "a_more": check.high[hypotheses["a_more"]] < 0,
        "b_more": check.low[hypotheses["b_more"]] > 0,
    }
    return rep


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
