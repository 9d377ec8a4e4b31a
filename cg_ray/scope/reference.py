"""Benchmark gaps by a reference of real use, judge-free (docs/method.md, "Benchmark gaps in scope").

For a benchmark b and a reference R (prompts the model meets in practice, or sibling benchmarks of the same
task), each concept c fires on k_b of b's n_b rows and on k_R of R's n_R rows (`counts.FiringCounts`, one
firing rule for both). Two rules (`ScopeRule.method`):

- **excess** (the default): a concept is *in use* when the rows of both sides pooled fire it on at least
  `min_share` of rows — a filter the test below does not reuse (under the null both sides share one
  distribution, so the pooled share says nothing about their difference: independent filtering, Bourgon et
  al. 2010); it is a **gap** when the reference's share exceeds the benchmark's by more than `margin`,
  confidently: the one-sided z-test of H0: p_R − p_b ≤ margin with each side's variance by cluster (its
  groups, `clustered`), never below the binomial variance of the pooled share on that side's effective rows,
  and Benjamini–Hochberg over the concepts in use at `fdr`. A difference is what a latent with a background
  can show: a question form that is 15% of the reference and fires its latent on 58% of those rows and 7% of
  the rest moves that latent's share from 7% to 15% — a ratio of 0.47, never confidently below 0.5, but an
  excess of 8 points, many standard errors from 0.
- **ratio** (the rule before): in use when the reference share's exact interval starts at `min_share`; a gap
  when p_b / p_R is confidently below `ratio` (Miettinen–Nurminen score test, rows as independent draws).

Both show the ratio p_b / p_R with its interval, and **missing** (k_b = 0) with how sure that is: the share is
below 1 − α^(1/G) over b's G groups (each group one draw, the worst case; with one row a group, the exact
bound 1 − α^(1/n_b)).

Only activations enter, never scores: a benchmark's scope needs no model. The null — b and R drawn from
one population, with rows in templates on both sides — gives no gap at the stated rate
(tests/scope/test_reference.py, tests/scope/test_clustered.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, test_proportions_2indep

from cg_ray.scope.clustered import GroupedShares, missing_bound

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = ["ReferenceComparison", "ScopeRule", "compare", "excess_pvalues", "missing_bound"]


class ScopeRule(BaseModel):
    """When a concept is in a reference's use, and when a benchmark confidently tests it less."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["excess", "ratio"] = Field(
        "excess", description="excess: p_R − p_b confidently above `margin` (by cluster); ratio: the rule before"
    )
    min_share: float = Field(
        0.02, gt=0.0, lt=1.0, description="in use: pooled share (excess) or the reference share's low end (ratio)"
    )
    margin: float = Field(0.02, ge=0.0, lt=1.0, description="excess: a gap when p_R − p_b is confidently above this")
    ratio: float = Field(0.5, gt=0.0, le=1.0, description="ratio: a gap when p_b is below this × p_R")
    fdr: float = Field(
        0.10, gt=0.0, lt=1.0, description="Benjamini–Hochberg level over the concepts (and themes) tested"
    )
    confidence: float = Field(0.95, gt=0.5, lt=1.0, description="level of the shares' and ratio's intervals")
    # the row-level view (scope/uncovered.py)
    density: float = Field(
        0.25,
        gt=0.0,
        lt=1.0,
        description="rows: a reference row is uncovered where the benchmark's density is ≤ this × the reference's",
    )
    region_ratio: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="rows: the uncovered region is confirmed when its held-out density ratio is confidently below this",
    )
    folds: int = Field(5, ge=2, le=20, description="rows: cross-fitting folds (by group)")
    seed: int = Field(0, description="rows: the folds' and the themes' halves' seed")
    themes: int = Field(10, ge=1, le=50, description="rows: at most this many themes")

    def in_words(self) -> str:
        if self.method == "excess":
            return (
                f"in use when ≥ {self.min_share:.0%} of the rows of both sides pooled fire the concept; a gap when the "
                f"reference's share exceeds the benchmark's by more than {self.margin:.0%} of rows (one-sided test "
                f"by cluster over each side's groups, Benjamini–Hochberg q ≤ {self.fdr:g} over the concepts in use)"
            )
        return (
            f"in scope by the reference when the reference's share's {self.confidence:.0%} interval starts at "
            f"≥ {self.min_share:.0%}; a gap when the benchmark's share is below {self.ratio:g} × the reference's "
            f"(one-sided score test, Benjamini–Hochberg q ≤ {self.fdr:g} over those concepts)"
        )


@dataclass(frozen=True)
class ReferenceComparison:
    """One benchmark against one reference: per concept, both shares with intervals and the verdict."""

    benchmark: str
    reference: str
    n_bench: int
    n_reference: int
    rule: ScopeRule
    table: pd.DataFrame  # one row per concept (columns: see `compare`)

    @property
    def gaps(self) -> pd.DataFrame:
        """The in-scope gaps, most confident first (smallest q, then the largest reference share)."""
        g = self.table[self.table["gap"]]
        return g.sort_values(["q_value", "reference_share"], ascending=[True, False])

    @property
    def n_in_reference(self) -> int:
        return int(self.table["in_reference"].sum())


def compare(
    bench_fires: IntArray,
    n_bench: int,
    ref_fires: IntArray,
    n_reference: int,
    rule: ScopeRule | None = None,
    *,
    benchmark: str = "benchmark",
    reference: str = "reference",
    bench_shares: GroupedShares | None = None,
    ref_shares: GroupedShares | None = None,
) -> ReferenceComparison:
    """Per concept: b's and R's firing shares with intervals, the ratio p_b / p_R with its interval, the
    one-sided test of the rule and its BH q-value over the concepts in use, and the verdicts.
    `bench_shares` / `ref_shares`: the same counts by group (`clustered.grouped_shares`); without them every
    row is its own group."""
    rule = rule or ScopeRule()
    if n_bench <= 0 or n_reference <= 0:
        raise ValueError(f"both sides need rows: {benchmark} has {n_bench}, {reference} {n_reference}")
    kb = np.asarray(bench_fires, dtype=np.int64)
    kr = np.asarray(ref_fires, dtype=np.int64)
    bs = bench_shares or GroupedShares.independent(kb, n_bench)
    rs = ref_shares or GroupedShares.independent(kr, n_reference)
    b_low, b_high = bs.interval(rule.confidence)
    r_low, r_high = rs.interval(rule.confidence)
    if rule.method == "excess":
        in_ref = (kb + kr) / (n_bench + n_reference) >= rule.min_share
    else:
        in_ref = r_low >= rule.min_share
    p = np.full(kb.shape, np.nan)
    q = np.full(kb.shape, np.nan)
    ratio_low = np.full(kb.shape, np.nan)
    ratio_high = np.full(kb.shape, np.nan)
    if in_ref.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            lo, hi = confint_proportions_2indep(
                kb[in_ref], n_bench, kr[in_ref], n_reference,
                compare="ratio", method="log-adjusted", alpha=1.0 - rule.confidence,
            )  # fmt: skip
            if rule.method == "excess":
                p_in = excess_pvalues(bs, rs, in_ref, rule.margin)
            else:
                res = test_proportions_2indep(
                    kb[in_ref], n_bench, kr[in_ref], n_reference,
                    value=rule.ratio, compare="ratio", alternative="smaller", method="score",
                )  # fmt: skip
                p_in = np.asarray(res.pvalue, dtype=np.float64)
        p[in_ref] = np.clip(np.nan_to_num(p_in, nan=1.0), 0.0, 1.0)
        q[in_ref] = multipletests(p[in_ref], alpha=rule.fdr, method="fdr_bh")[1]
        ratio_low[in_ref], ratio_high[in_ref] = lo, hi
    bench_share = kb / n_bench
    ref_share = kr / n_reference
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(kr > 0, bench_share / ref_share, np.nan)
    table = pd.DataFrame(
        {
            "concept": np.arange(kb.size, dtype=np.int64),
            "bench_rows": kb,
            "bench_share": bench_share,
            "bench_low": b_low,
            "bench_high": b_high,
            "reference_rows": kr,
            "reference_share": ref_share,
            "reference_low": r_low,
            "reference_high": r_high,
            "ratio": ratio,
            "ratio_low": ratio_low,
            "ratio_high": ratio_high,
            "p_value": p,
            "q_value": q,
            "in_reference": in_ref,
            "gap": in_ref & (q <= rule.fdr),
            "missing": kb == 0,
            # the sums by group that the test used (`clustered.GroupedShares.from_sums`): an augment recomputes
            # the same verdicts from them, with its items added
            **_sums("bench", bs),
            **_sums("reference", rs),
        }
    )
    return ReferenceComparison(benchmark, reference, int(n_bench), int(n_reference), rule, table)


SUM_COLUMNS = ("groups", "sum_k2", "sum_kn", "sum_n2")


def _sums(side: str, shares: GroupedShares) -> dict[str, npt.NDArray[np.generic]]:
    size = shares.k.size
    return {
        f"{side}_groups": np.full(size, shares.n_groups, dtype=np.int64),
        f"{side}_sum_k2": shares.sum_k2,
        f"{side}_sum_kn": shares.sum_kn,
        f"{side}_sum_n2": np.full(size, shares.sum_n2),
    }


def shares_of(table: pd.DataFrame, side: str) -> GroupedShares | None:
    """The side's shares by group as a scope table stored them (None: a table written before they were)."""
    if f"{side}_sum_k2" not in table.columns:
        return None
    k = table[f"{side}_rows"].to_numpy(np.float64)
    n = int(table[f"{side}_n"].iloc[0]) if f"{side}_n" in table.columns else int(table[f"{side}_rows"].iloc[0])
    return GroupedShares.from_sums(
        k, n, int(table[f"{side}_groups"].iloc[0]), table[f"{side}_sum_k2"].to_numpy(np.float64),
        table[f"{side}_sum_kn"].to_numpy(np.float64), float(table[f"{side}_sum_n2"].iloc[0]),
    )  # fmt: skip


def excess_pvalues(
    bench: GroupedShares, ref: GroupedShares, columns: npt.NDArray[np.bool_], margin: float
) -> FloatArray:
    """One-sided p of H0: p_R − p_b ≤ margin per selected column, each side's variance by cluster and never
    below the binomial variance of the pooled share on that side's effective rows (a side with k = 0 has no
    variance to measure: its effective rows are then its groups, the worst case)."""
    pooled = (bench.k + ref.k)[columns] / (bench.n + ref.n)
    floor = pooled * (1 - pooled)

    def variance(side: GroupedShares) -> FloatArray:
        n_eff = np.where(side.k[columns] > 0, side.n_effective[columns], float(side.n_groups))
        return np.asarray(np.maximum(side.variance[columns], floor / n_eff), dtype=np.float64)

    se = np.sqrt(variance(bench) + variance(ref))
    diff = ref.share[columns] - bench.share[columns]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, (diff - margin) / se, np.where(diff > margin, np.inf, -np.inf))
    return np.asarray(stats.norm.sf(z), dtype=np.float64)
