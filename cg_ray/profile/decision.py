"""The one decision rule of every finding (failure modes, slices, concepts): docs/findings.md.

A finding is a rule on rows. In each of R random grouped splits (`splits.py`) one part chooses the findings
it would report and the rest tests each of them, the same rule, with a one-sided cluster contrast
(`heldout.HeldOut.contrast` → `SplitTest`). Within a split, weighted Benjamini–Hochberg at SPLIT_SHARE × fdr
runs over the rules it tested (`split_multipliers`, weights ∝ 1/rank on the choosing part). Over the splits,
each split's rejections become e-values — a finding's rejected rules / (SPLIT_SHARE · fdr · the split's
rejections) — averaged over the R splits, and e-BH (Wang & Ramdas 2022) confirms the k̂ findings with the
largest mean e-value, k̂ the largest k whose k-th e-value is at least 1 / (fdr · k). This is Ren & Barber's
derandomisation (derandomised knockoffs, JRSS-B 86, 2024), with a split in place of a knockoff draw: the
false discovery rate of the confirmed set is at most fdr under any dependence between the splits, as long
as each split's BH holds its own (its p-values are from rows that did not choose). Its q-value is the
e-BH level at which the finding would be confirmed:

    confirmed  ⇔  q ≤ fdr

and nothing else. The rule it replaced (the splits' median BH q-value × 2, Meinshausen, Meier & Bühlmann's
quantile aggregation applied to q-values) confirmed the same findings as often on the calibration suites
(docs/findings.md has the table) but has no FDR theorem behind it: a split rejecting many findings that
the median then drops can leave its false ones unpaid for.

The interval shown is each split's one-sided bound at the level its BH would give the finding if the
finding were rejected there (`split_level`: SPLIT_SHARE · fdr · weight · its rank among the rejections / the
rules tested, over its tries), the median of those over the splits (a split that did not choose it counts
as an unbounded side). A bound fails with probability at most its level, and the median fails only when
half of them do, so the interval misses the effect with probability at most 2 × that level ≤ fdr × the
finding's BH share — the Benjamini–Yekutieli false-coverage adjustment. The minimum detectable effect
(`mde`) is the effect whose test at that same level would reject with 80% power: "the effect this run would
confirm with 80% power".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt
from scipy import stats
from statsmodels.stats.multitest import multipletests

from cg_ray.arrays import FloatArray

Alternative = Literal["less", "greater"]
LESS: Alternative = "less"
GREATER: Alternative = "greater"

SPLIT_SHARE = 0.5  # each split's BH runs at this share of fdr (Ren & Barber's α/2; measured in docs/findings.md)
GAMMA = 0.5  # the interval's quantile over the splits: the median
POWER = 0.8  # the power the minimum detectable effect is stated at
P_FLOOR = 1e-300  # a p-value of exactly 0 would give an infinite multiplier

# What every output says of the rule (summary.json, the CLI, the report, the explorer and the API quote these).
DECISION = (
    "confirmed ⇔ q ≤ fdr: q is the e-BH level of the splits' mean e-value, each split's weighted BH at fdr/2 "
    "(derandomised e-BH, Ren & Barber 2024): FDR ≤ fdr under any dependence between the splits"
)
INTERVAL = (
    "the median over the splits of each split's one-sided bound at the level its BH would give the finding if "
    "rejected (Benjamini–Yekutieli): it misses the effect with probability at most fdr × the finding's BH share"
)

K = TypeVar("K", bound=Hashable)  # a finding's identity: a concept and direction, a slice's conditions, a mode


@dataclass(frozen=True)
class SplitTest:
    """One rule tested on one split's test half: its contrast with the other rows of the same cells."""

    estimate: float
    se: float  # nan: too few clusters to test (p = 1)
    df: int
    p_value: float
    n_rows: int
    n_clusters: int
    baseline: float = float("nan")  # the mean its rows were compared with
    n_dropped: int = 0  # its rows in cells with no other row to compare with (left out of the contrast)
    se_cluster: float = float("nan")  # the CR1 sandwich alone, before the Bernoulli floor

    @property
    def testable(self) -> bool:
        return bool(np.isfinite(self.se) and self.se > 0 and self.df >= 1)

    def bound(self, alpha: float, side: Literal["upper", "lower"]) -> float:
        """The one-sided 1 − α confidence bound of the effect (±inf when the rule was not testable)."""
        if not self.testable or not 0 < alpha < 1:
            return math.inf if side == "upper" else -math.inf
        t = float(stats.t.isf(alpha, self.df))
        return self.estimate + t * self.se if side == "upper" else self.estimate - t * self.se


@dataclass(frozen=True)
class Tried:
    """A finding's test in one split: the best of the rules the split chose for it (smallest p over its level),
    the one-sided level that split's BH gives it if rejected, and its e-value there."""

    test: SplitTest
    level: float  # SPLIT_SHARE · fdr · weight · (its rank among the rejections) / rules tested / its tries
    e_value: float  # its rejected rules / (SPLIT_SHARE · fdr · the split's rejections); 0 when none rejected

    @property
    def rejected(self) -> bool:
        return self.e_value > 0


def rank_weights(ranks: npt.NDArray[np.integer]) -> FloatArray:
    """BH weights from the candidates' ranks on the choosing half (1 = the best): ∝ 1/rank, mean 1. They are
    fixed before the test half is read (Genovese, Roeder & Wasserman 2006)."""
    w = 1.0 / np.asarray(ranks, dtype=np.float64)
    out: FloatArray = w / w.mean() if w.size else w
    return out


@dataclass(frozen=True)
class Verdict:
    """A finding judged over the splits. Figures are None where too few splits chose it to stand for it."""

    estimate: float | None  # the median of its test halves' estimates
    low: float | None  # the interval the decision rule does not reject (see the module docstring)
    high: float | None
    p_value: float
    q_value: float
    confirmed: bool  # q_value ≤ fdr: the one rule
    splits_selected: int
    n_heldout: int  # scored rows it was tested on (median over the splits that chose it)
    n_clusters: int
    baseline: float | None = None
    mde: float | None = None  # the effect it would be confirmed at with 80% power (units of the estimate)
    n_dropped: int = 0  # rows left out for lack of comparison rows in their cell (median split)


def quantile_rank(splits: int, gamma: float = GAMMA) -> int:
    """k = ⌈γR⌉: the split whose value decides (1-based)."""
    return max(1, math.ceil(gamma * splits - 1e-12))


def split_tries(chosen: Sequence[tuple[K, SplitTest, int]], fdr: float) -> dict[K, Tried]:
    """One split: weighted BH at SPLIT_SHARE × fdr over the rules it tested ((finding, test, rank on the
    choosing part) each), and per finding its e-value, its best rule's test and the level it would pay."""
    if not chosen:
        return {}
    level0 = SPLIT_SHARE * fdr
    p = np.maximum(np.array([t.p_value for _, t, _ in chosen], dtype=np.float64), P_FLOOR)
    ranks = np.array([r for _, _, r in chosen], dtype=np.int64)
    w = rank_weights(ranks)
    rejected = multipletests(p / w, alpha=level0, method="fdr_bh")[0]  # weighted BH: p / w into BH's step-up
    n_rejected, m = int(rejected.sum()), len(chosen)
    tries = Counter(key for key, _, _ in chosen)
    e: dict[K, float] = {}
    best: dict[K, tuple[float, SplitTest, float]] = {}
    for (key, t, _), w_i, hit, p_i in zip(chosen, w, rejected, p, strict=True):
        # BH rejects the r-th smallest p/w at level0 · r / m; a rule not rejected would be the (R + 1)-th.
        level = level0 * w_i * (n_rejected if hit else n_rejected + 1) / m / tries[key]
        e[key] = e.get(key, 0.0) + (1.0 / (level0 * n_rejected) if hit else 0.0)
        if key not in best or p_i / level < best[key][0]:
            best[key] = (p_i / level, t, level)
    return {key: Tried(t, level, e[key]) for key, (_, t, level) in best.items()}


def e_bh_q_values(e_values: Mapping[K, float]) -> dict[K, float]:
    """e-BH's adjusted values: confirmed at level α ⇔ q ≤ α, for e-values built at this fdr. e-BH rejects the
    k̂ largest, k̂ = max{k : e_(k) ≥ 1 / (α k)}; so q_(i) = min over k ≥ i of 1 / (e_(k) k), capped at 1.
    Written here: statsmodels has BH on p-values, not e-BH."""
    order = sorted(e_values, key=lambda k: -e_values[k])
    e = np.array([e_values[k] for k in order], dtype=np.float64)
    with np.errstate(divide="ignore"):
        v = np.where(e > 0, 1.0 / (e * np.arange(1, e.size + 1)), np.inf)
    q = np.minimum(1.0, np.minimum.accumulate(v[::-1])[::-1])
    return {k: float(x) for k, x in zip(order, q, strict=True)}


def aggregate(
    tried: Mapping[int, Tried],
    splits: int,
    q_value: float,
    fdr: float,
    bounds: tuple[float, float] = (-1.0, 1.0),
    gamma: float = GAMMA,
) -> Verdict:
    """A finding's verdict from split → its test there and its e-BH q-value (`judge`): the interval, the
    estimate and the MDE over the splits that chose it."""
    k = quantile_rank(splits, gamma)
    p = np.ones(splits)
    for s, t in tried.items():
        p[s] = t.test.p_value
    p_agg = min(1.0, float(np.sort(p)[k - 1]) / gamma)  # unadjusted: Meinshausen's quantile of the raw p
    confirmed = q_value <= fdr
    tests = [t for t in tried.values() if t.test.n_rows > 0]
    if not tests:
        return Verdict(None, None, None, p_agg, q_value, confirmed, len(tried), 0, 0)
    upper = np.full(splits, math.inf)
    lower = np.full(splits, -math.inf)
    for s, t in tried.items():
        upper[s] = t.test.bound(t.level, "upper")
        lower[s] = t.test.bound(t.level, "lower")
    high = float(np.sort(upper)[k - 1])
    low = float(-np.sort(-lower)[k - 1])

    def clip(x: float) -> float | None:
        return float(np.clip(x, *bounds)) if np.isfinite(x) else None

    middle = sorted(tests, key=lambda t: t.test.n_rows)[len(tests) // 2].test
    return Verdict(
        clip(float(np.median([t.test.estimate for t in tests]))),  # the median split's, even outside the interval
        clip(low),
        clip(high),
        p_agg,
        q_value,
        confirmed,
        len(tried),
        middle.n_rows,
        middle.n_clusters,
        float(middle.baseline) if np.isfinite(middle.baseline) else None,
        minimum_detectable_effect(list(tried.values())),
        middle.n_dropped,
    )


def minimum_detectable_effect(tried: list[Tried], power: float = POWER) -> float | None:
    """The effect the rule would confirm with `power`: (t at the level its splits' BH would give it if
    rejected + z at the power) × its standard error, medians over the splits that tested it."""
    ok = [t for t in tried if t.test.testable]
    if not ok:
        return None
    crit = [float(stats.t.isf(min(0.5, t.level), t.test.df)) for t in ok]
    se = [t.test.se for t in ok]
    return float(np.median(crit) + stats.norm.ppf(power)) * float(np.median(se))


def typical_mde(
    n_rows: int, n_total: int, variance: float, level: float, test_share: float, power: float = POWER
) -> float | None:
    """The minimum detectable effect of a rule holding `n_rows` of `n_total` rows, tested on `test_share` of
    them against the rest of that part, for a score variance `variance` within cells (one row a cluster)."""
    half, rest = n_rows * test_share, (n_total - n_rows) * test_share
    if half < 2 or rest < 2 or variance <= 0:
        return None
    se = math.sqrt(variance * (1.0 / half + 1.0 / rest))
    return float(stats.norm.isf(level) + stats.norm.ppf(power)) * se


def judge(
    per_split: Sequence[Sequence[tuple[K, SplitTest, int]]], splits: int, fdr: float, bounds: tuple[float, float]
) -> dict[K, Verdict]:
    """Every finding's verdict from what each split tested: per split, (finding, its test, its rank on the
    choosing part) for each rule the split chose. Each split's weighted BH makes e-values (`split_tries`);
    their mean over the R splits goes into e-BH (`e_bh_q_values`); then `aggregate`."""
    tried: dict[K, dict[int, Tried]] = {}
    for s, chosen in enumerate(per_split):
        for key, t in split_tries(chosen, fdr).items():
            tried.setdefault(key, {})[s] = t
    mean_e = {key: sum(t.e_value for t in per.values()) / splits for key, per in tried.items()}
    q = e_bh_q_values(mean_e)
    return {key: aggregate(per, splits, q[key], fdr, bounds) for key, per in tried.items()}


def not_tested() -> Verdict:
    return Verdict(None, None, None, 1.0, 1.0, False, 0, 0, 0)


def rank_key(v: Verdict) -> tuple[int, float, float]:
    """Confirmed first, by the upper end of their interval; then the candidates by q-value."""
    if v.confirmed:
        return (0, v.high if v.high is not None else 1.0, v.q_value)
    return (1, v.q_value, v.high if v.high is not None else 1.0)
