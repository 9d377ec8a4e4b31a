"""Benchmark gaps by a reference of real use, judge-free (docs/method.md, "Benchmark gaps in scope").

For a benchmark b and a reference R (prompts the model meets in practice, or sibling benchmarks of the same
task), each concept c fires on k_b of b's n_b rows and on k_R of R's n_R rows (`counts.FiringCounts`, one
firing rule for both). Then:

- **in the reference's use**: the lower end of the exact (Clopper–Pearson) interval of k_R / n_R reaches
  `min_share` — the reference confidently uses the concept, not by a row or two;
- **a gap**: among those, b's share is below `ratio` × R's, tested one-sided (H0: p_b / p_R ≥ ratio, the
  score test for a ratio of two independent proportions, Miettinen–Nurminen, statsmodels), with
  Benjamini–Hochberg over the concepts in the reference's use at `fdr`. The interval of p_b / p_R is shown
  beside it (Koopman-style log-adjusted, which stays finite when k_b = 0);
- **missing**: k_b = 0, and how sure that is depends on n_b: the true share is below 1 − (1 − level)^(1/n_b)
  with that confidence (0 of 200 rows: < 1.5%; 0 of 20,000: < 0.015%).

Only activations enter, never scores: a benchmark's scope needs no model. The null — b and R drawn from
one population — gives no gap at the stated rate (tests/scope/test_reference.py, 400 replications).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint, test_proportions_2indep

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class ScopeRule(BaseModel):
    """When a concept is in a reference's use, and when a benchmark confidently tests it less."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_share: float = Field(0.02, gt=0.0, lt=1.0, description="reference share (its interval's low end) in use")
    ratio: float = Field(0.5, gt=0.0, le=1.0, description="a gap: the benchmark's share below this × the reference's")
    fdr: float = Field(0.10, gt=0.0, lt=1.0, description="Benjamini–Hochberg level over the concepts tested")
    confidence: float = Field(0.95, gt=0.5, lt=1.0, description="level of the shares' and ratio's intervals")

    def in_words(self) -> str:
        return (
            f"in scope by the reference when the reference's share's {self.confidence:.0%} interval starts at "
            f"≥ {self.min_share:.0%}; a gap when the benchmark's share is below {self.ratio:g} × the reference's "
            f"(one-sided score test, Benjamini–Hochberg q ≤ {self.fdr:g} over those concepts)"
        )


def missing_bound(n_rows: int | IntArray, confidence: float = 0.95) -> FloatArray:
    """The upper `confidence` bound on a share seen on 0 of `n_rows` rows (exact: 1 − (1 − level)^(1/n))."""
    n = np.asarray(n_rows, dtype=np.float64)
    return np.asarray(1.0 - np.power(1.0 - confidence, 1.0 / np.maximum(n, 1.0)), dtype=np.float64)


def share_interval(k: IntArray, n: int, confidence: float) -> tuple[FloatArray, FloatArray]:
    """Exact (Clopper–Pearson) interval of k / n."""
    low, high = proportion_confint(np.asarray(k), n, alpha=1.0 - confidence, method="beta")
    return np.nan_to_num(np.asarray(low, dtype=np.float64)), np.nan_to_num(np.asarray(high, dtype=np.float64), nan=1.0)


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
) -> ReferenceComparison:
    """Per concept: b's and R's firing shares with exact intervals, the ratio p_b / p_R with its interval,
    the one-sided test and its BH q-value over the concepts in R's use, and the verdicts."""
    rule = rule or ScopeRule()
    if n_bench <= 0 or n_reference <= 0:
        raise ValueError(f"both sides need rows: {benchmark} has {n_bench}, {reference} {n_reference}")
    kb = np.asarray(bench_fires, dtype=np.int64)
    kr = np.asarray(ref_fires, dtype=np.int64)
    b_low, b_high = share_interval(kb, n_bench, rule.confidence)
    r_low, r_high = share_interval(kr, n_reference, rule.confidence)
    in_ref = r_low >= rule.min_share
    p = np.full(kb.shape, np.nan)
    q = np.full(kb.shape, np.nan)
    ratio_low = np.full(kb.shape, np.nan)
    ratio_high = np.full(kb.shape, np.nan)
    if in_ref.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            res = test_proportions_2indep(
                kb[in_ref], n_bench, kr[in_ref], n_reference,
                value=rule.ratio, compare="ratio", alternative="smaller", method="score",
            )  # fmt: skip
            lo, hi = confint_proportions_2indep(
                kb[in_ref], n_bench, kr[in_ref], n_reference,
                compare="ratio", method="log-adjusted", alpha=1.0 - rule.confidence,
            )  # fmt: skip
        p[in_ref] = np.clip(np.nan_to_num(np.asarray(res.pvalue, dtype=np.float64), nan=1.0), 0.0, 1.0)
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
        }
    )
    return ReferenceComparison(benchmark, reference, int(n_bench), int(n_reference), rule, table)
