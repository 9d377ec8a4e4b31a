"""The one decision rule of every finding (failure modes, slices, concepts): docs/findings.md.

A finding is a rule on rows. In each of R random grouped splits (`splits.py`) one half chooses the findings
it would report and the other half tests each of them, the same rule, with a one-sided cluster contrast
(`heldout.HeldOut.contrast` → `SplitTest`). Within a split, the rules it tested get weighted
Benjamini–Hochberg q-values (`split_multipliers`); a finding that a split chose as several rules pays for each
(Bonferroni). Over the splits the q-values are combined by Meinshausen, Meier & Bühlmann's quantile rule
(p-values for high-dimensional regression, JASA 104, 2009), applied to each split's BH q-values:
Q = min(1, q_(k) / γ), q_(k) the k = ⌈γR⌉-th smallest, a split that did not choose the finding counting as
q = 1 — their aggregation holds under any dependence between the splits, and the confirmed set no longer
hangs on one seed.

    confirmed  ⇔  Q ≤ fdr

and nothing else. Measured against derandomised e-BH (which has an FDR theorem under any dependence between
the splits) and other quantiles on 400 simulated suites per setting (scripts/fdr_simulation.py,
docs/findings.md), this rule found the most planted effects with a realised FDR of at most 0.025 at fdr 0.10;
e-BH found fewer there and none of the concepts this rule confirms on real BBQ scores.

The interval shown is each split's one-sided bound at the level the finding would pay in that split if it
were rejected there (`SplitTry.paying`: γ·fdr over its weighted-BH factor at its rank among the split's
rejections, R + 1 when not rejected, and its Bonferroni tries: the Benjamini & Yekutieli 2005 adjustment of
selected findings' intervals), combined over the splits with the same quantile. Were each split's level
fixed in advance, a bound would miss with probability at most its level and the median only when half of them
do (at most fdr over that factor, by Markov's inequality); the level hangs on the test half itself (the rank
among the split's rejections), so that is a heuristic: the coverage measured on simulated suites
(scripts/fdr_simulation.py, docs/findings.md) is the evidence. A confirmed finding's interval always excludes
0 (its splits that rejected it pay exactly that level); one that just missed can too. The minimum detectable
effect (`mde`) is the effect whose tests at those same levels would confirm it with 80% power: "the effect
this run would confirm with 80% power", never the looser level the BH step-up gives a candidate far down the
order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt
from scipy import stats

from cg_ray.arrays import FloatArray

Alternative = Literal["less", "greater"]
LESS: Alternative = "less"
GREATER: Alternative = "greater"

GAMMA = 0.5  # Meinshausen's γ: the median split decides
POWER = 0.8  # the power the minimum detectable effect is stated at
P_FLOOR = 1e-300  # a p-value of exactly 0 would give an infinite multiplier

# What every output says of the rule (summary.json, the CLI, the report, the explorer and the API quote these).
# What the rule was measured to give (scripts/fdr_simulation.py, docs/findings.md), quoted wherever it is.
MEASURED = "measured: realised FDR ≤ 2.5% at fdr 10% over 400 simulated suites per setting, 0–15 real effects"
DECISION = (
    "confirmed ⇔ q ≤ fdr: q is the splits' median Benjamini–Hochberg q-value × 2 (Meinshausen et al. 2009); "
    f"{MEASURED} (docs/findings.md)"
)
INTERVAL = (
    "the median over the splits of each split's bound at the level the finding would pay there if confirmed "
    "(Benjamini–Yekutieli): a heuristic for missing the effect with probability at most fdr over its BH "
    "factor, its measured coverage the evidence (docs/findings.md)"
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
class SplitTry:
    """A finding's test in one split, with what that split's multiplicity made of its p-value."""

    test: SplitTest
    multiplier: float  # q = min(1, multiplier × p): the weighted-BH factor times the split's tries
    paying: float = math.nan  # the factor it would pay if rejected: m / (w × its rank among the rejections) × tries

    @property
    def q_value(self) -> float:
        return min(1.0, self.multiplier * max(self.test.p_value, P_FLOOR))

    @property
    def factor(self) -> float:
        """The factor its interval and MDE use: what it would pay if confirmed (its q's own when not known)."""
        return self.paying if math.isfinite(self.paying) else self.multiplier


def rank_weights(ranks: npt.NDArray[np.integer]) -> FloatArray:
    """BH weights from the candidates' ranks on the choosing half (1 = the best): ∝ 1/rank, mean 1. They are
    fixed before the test half is read (Genovese, Roeder & Wasserman 2006)."""
    w = 1.0 / np.asarray(ranks, dtype=np.float64)
    out: FloatArray = w / w.mean() if w.size else w
    return out


def split_multipliers(p_values: FloatArray, ranks: npt.NDArray[np.integer]) -> FloatArray:
    """Per rule of one split: q / p of weighted Benjamini–Hochberg (p / w into BH's step-up), uncapped.

    Written here rather than taken from statsmodels' `multipletests`: the interval needs the factor itself,
    which multipletests returns only capped at q = 1."""
    p = np.maximum(np.asarray(p_values, dtype=np.float64), P_FLOOR)
    if p.size == 0:
        return p
    w = rank_weights(ranks)
    pw = p / w
    order = np.argsort(pw, kind="stable")
    m = p.size
    stepped = pw[order] * m / np.arange(1, m + 1)
    q_sorted = np.minimum.accumulate(stepped[::-1])[::-1]  # BH's step-up: q_i = min over j ≥ i
    q = np.empty(m)
    q[order] = q_sorted
    out: FloatArray = q / p
    return out


def paying_factors(
    p_values: FloatArray, multipliers: FloatArray, ranks: npt.NDArray[np.integer], level: float
) -> FloatArray:
    """Per rule of one split (its p-values and their `split_multipliers`): the weighted-BH factor it would pay
    if rejected at `level` (γ·fdr): BH rejects p / w ≤ level · R / m, so each rejected rule pays m / (w R) and
    one not rejected would pay m / (w (R + 1)) as one more rejection — never the smaller factor the step-up
    gives a rule far down the order at its own p."""
    p = np.maximum(np.asarray(p_values, dtype=np.float64), P_FLOOR)
    if p.size == 0:
        return p
    w = rank_weights(ranks)
    rejected = np.minimum(1.0, multipliers * p) <= level
    n_rejected = int(rejected.sum())
    out: FloatArray = p.size / (w * np.where(rejected, n_rejected, n_rejected + 1))
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


def combined_q(tried: Mapping[int, SplitTry], splits: int, gamma: float = GAMMA) -> float:
    """Q = min(1, q_(k) / γ) over the splits, k = ⌈γR⌉, a split that did not choose the finding counting as
    q = 1: the finding is confirmed exactly when Q ≤ fdr."""
    q = np.ones(splits)
    for s, t in tried.items():
        q[s] = t.q_value
    return min(1.0, float(np.sort(q)[quantile_rank(splits, gamma) - 1]) / gamma)


def aggregate(
    tried: Mapping[int, SplitTry],
    splits: int,
    fdr: float,
    bounds: tuple[float, float] = (-1.0, 1.0),
    gamma: float = GAMMA,
) -> Verdict:
    """A finding's verdict from split → its test there (the splits that did not choose it count as q = 1)."""
    k = quantile_rank(splits, gamma)
    q_agg = combined_q(tried, splits, gamma)
    p = np.ones(splits)
    for s, t in tried.items():
        p[s] = t.test.p_value
    p_agg = min(1.0, float(np.sort(p)[k - 1]) / gamma)
    confirmed = q_agg <= fdr
    tests = [t for t in tried.values() if t.test.n_rows > 0]
    if not tests:
        return Verdict(None, None, None, p_agg, q_agg, confirmed, len(tried), 0, 0)
    # Each split's test at the level it would pay if rejected there: a split that rejected it pays exactly the
    # level its p met, so a confirmed finding's median bound excludes 0.
    alphas = {s: gamma * fdr / t.factor for s, t in tried.items()}
    upper = np.full(splits, math.inf)
    lower = np.full(splits, -math.inf)
    for s, t in tried.items():
        upper[s] = t.test.bound(alphas[s], "upper")
        lower[s] = t.test.bound(alphas[s], "lower")
    high = float(np.sort(upper)[k - 1])
    low = float(-np.sort(-lower)[k - 1])  # a "greater" finding is confirmed exactly when this is above 0
    estimate = float(np.median([t.test.estimate for t in tests]))

    def clip(x: float) -> float | None:
        return float(np.clip(x, *bounds)) if np.isfinite(x) else None

    shown_low, shown_high = clip(low), clip(high)  # the estimate stays the median split's, even outside them
    middle = sorted(tests, key=lambda t: t.test.n_rows)[len(tests) // 2].test
    return Verdict(
        clip(estimate),
        shown_low,
        shown_high,
        p_agg,
        q_agg,
        confirmed,
        len(tried),
        middle.n_rows,
        middle.n_clusters,
        float(middle.baseline) if np.isfinite(middle.baseline) else None,
        minimum_detectable_effect(list(tried.values()), gamma * fdr),
        middle.n_dropped,
    )


def minimum_detectable_effect(tried: list[SplitTry], level: float, power: float = POWER) -> float | None:
    """The effect the rule would confirm with `power`: (t at the level it would pay if confirmed + z at the
    power) × its standard error, medians over the splits that tested it (`level` = γ·fdr, divided by each
    split's paying factor)."""
    ok = [t for t in tried if t.test.testable]
    if not ok:
        return None
    crit = [float(stats.t.isf(min(0.5, level / t.factor), t.test.df)) for t in ok]
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


def split_tries(
    per_split: Sequence[Sequence[tuple[K, SplitTest, int]]], fdr: float, gamma: float = GAMMA
) -> dict[K, dict[int, SplitTry]]:
    """Per finding, split → its test there with what the split's multiplicity made of it: weighted BH over the
    split's rules; a finding the split chose as several rules keeps its best and pays for each (Bonferroni)."""
    tried: dict[K, dict[int, SplitTry]] = {}
    for s, chosen in enumerate(per_split):
        if not chosen:
            continue
        p = np.array([t.p_value for _, t, _ in chosen])
        ranks = np.array([r for _, _, r in chosen], dtype=np.int64)
        mult = split_multipliers(p, ranks)
        paying = paying_factors(p, mult, ranks, gamma * fdr)
        tries: dict[K, int] = {}
        for key, _, _ in chosen:
            tries[key] = tries.get(key, 0) + 1
        for (key, t, _), c, f in zip(chosen, mult, paying, strict=True):
            here = SplitTry(t, float(c) * tries[key], float(f) * tries[key])
            best = tried.setdefault(key, {}).get(s)
            if best is None or here.q_value < best.q_value:
                tried[key][s] = here
    return tried


def judge(
    per_split: Sequence[Sequence[tuple[K, SplitTest, int]]],
    splits: int,
    fdr: float,
    bounds: tuple[float, float],
    gamma: float = GAMMA,
) -> dict[K, Verdict]:
    """Every finding's verdict from what each split tested: per split, (finding, its test, its rank on the
    choosing half) for each rule the split chose (`split_tries`), then `aggregate` at the quantile `gamma`
    (scripts/fdr_simulation.py compares others)."""
    tried = split_tries(per_split, fdr, gamma)
    return {key: aggregate(per, splits, fdr, bounds, gamma) for key, per in tried.items()}


FindingKind = Literal["slices", "concepts", "failure_modes"]


@dataclass(frozen=True)
class Judged:
    """One call of the decision rule as the judgement made it, for an `Observer`: what each split tested (as
    `judge` takes it), the verdicts, and for failure modes each finding's shown rule (its concepts)."""

    kind: FindingKind
    per_split: Sequence[Sequence[tuple[Any, SplitTest, int]]]
    splits: int
    fdr: float
    verdicts: Mapping[Any, Verdict]
    members: Mapping[Any, tuple[int, ...]] = field(default_factory=dict)


# Called with every call of the decision rule a judgement makes (scripts/fdr_simulation.py re-judges them under
# other rules): passed in, so a study sees exactly what the judgement tested, whatever imports what.
Observer = Callable[[Judged], None]


def not_tested() -> Verdict:
    return Verdict(None, None, None, 1.0, 1.0, False, 0, 0, 0)


def rank_key(v: Verdict) -> tuple[int, float, float]:
    """Confirmed first, by the upper end of their interval; then the candidates by q-value."""
    if v.confirmed:
        return (0, v.high if v.high is not None else 1.0, v.q_value)
    return (1, v.q_value, v.high if v.high is not None else 1.0)
