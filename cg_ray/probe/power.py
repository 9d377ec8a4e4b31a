"""How much of `--fdr` each probe of a run may spend, and the pairs a probe needs for 80% power at its level
(docs/probe.md, "The decision rule").

Alpha-spending over the run's probes: probe k (numbered as summary.json's "probes") runs Benjamini–Hochberg
at level share(k) · fdr, with share(1) = 0.8 and share(k) = 0.2 / (k(k − 1)) after, so the shares sum to 1
(0.2 · Σ_{k≥2} (1/(k − 1) − 1/k) telescopes to 0.2). Each probe tests only its own fresh pairs, so its
p-values are valid given everything before it, and the false-discovery proportion of the union of the
probes' confirmations is at most the sum of theirs: FDR ≤ Σ share(k) · fdr ≤ fdr, however many probes follow
and whatever the earlier ones showed. A null gap probed again and again is confirmed with probability at
most the same sum.

Power is exact, not the normal formula's (which bought 70–76% where it promised 80% for McNemar's test):
McNemar's exact test by enumerating the discordant count, the cluster-robust t-test by the noncentral t. It is
planned for the gap's place in a Benjamini–Hochberg family of m gaps (`family_level`) and for the pairs the
checks drop (`written_power`), and the minimum detectable effect inverts the same exact power (`mcnemar_mde`,
`t_mde`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats

MIN_PAIRS = 5  # below this no test is run (a McNemar test on < 5 pairs cannot reach p < 0.05)
POWER = 0.8  # the power `pairs_needed` and `mde` are stated at
FIRST_SHARE = 0.8  # the first probe's share of fdr; the rest, 0.2, is spread over every later probe
MAX_PAIRS = 1_000_000  # the search for pairs needed stops here (an effect too small to plan for)
MDE_STEPS = 14  # bisection steps of the mde on [0, 1]: to 1/16384, finer than any figure shown


def share(probe: int) -> float:
    """The share of `--fdr` that probe `probe` (1, 2, …) of a run spends: 0.8, then 0.2 / (k(k − 1))."""
    if probe < 1:
        raise ValueError(f"probes are numbered from 1, not {probe}")
    return FIRST_SHARE if probe == 1 else (1.0 - FIRST_SHARE) / (probe * (probe - 1))


def mcnemar_power(n: int, p_worse: float, p_better: float, alpha: float) -> float:
    """Exact power of McNemar's exact two-sided test at level `alpha` to find the target worse, with n pairs
    each discordant target-worse with probability p_worse and target-better with p_better.

    The sum over the discordant count D ~ Bin(n, p_worse + p_better) of P(the test rejects on the
    target-worse side | D). Given D = d the test (statsmodels' exact McNemar: p = min(1, 2 F(min(W, d − W)))
    with F the Bin(d, ½) CDF) rejects on that side exactly when the better count d − W is at most J_d, the
    largest j with 2 F(j) ≤ alpha; W | D ~ Bin(d, p_worse / (p_worse + p_better)). Enumerated, not simulated;
    hand-written because neither scipy nor statsmodels has the exact conditional test's power."""
    psi = p_worse + p_better
    if n <= 0 or psi <= 0:
        return 0.0
    d, j = np.arange(1, n + 1), _cutoffs(n, alpha)
    rejects_given_d = np.where(j >= 0, stats.binom.sf(d - j - 1, d, p_worse / psi), 0.0)
    return float(np.sum(stats.binom.pmf(d, n, psi) * rejects_given_d))


_CUTOFFS: dict[float, np.ndarray] = {}  # alpha -> J_d for d = 1, 2, …: a search asks for many n at one level


def _cutoffs(n: int, alpha: float) -> np.ndarray:
    """J_d of `mcnemar_power` for d = 1..n (−1 where no count rejects), computed once per level and extended
    by doubling."""
    known = _CUTOFFS.get(alpha)
    if known is None or known.size < n:
        d = np.arange(1, max(n, 2 * (0 if known is None else known.size), 64) + 1)
        j = stats.binom.ppf(alpha / 2, d, 0.5)  # the smallest j with F(j) ≥ alpha / 2 …
        j = np.where(2.0 * stats.binom.cdf(j, d, 0.5) <= alpha, j, j - 1)  # … stepped back unless it rejects
        known = _CUTOFFS[alpha] = np.minimum(j, np.ceil(d / 2) - 1)  # the worse count must exceed the better
    return known[:n]


def mcnemar_pairs_needed(psi: float, effect: float, alpha: float, start: int) -> int:
    """The fewest pairs whose exact McNemar power (`mcnemar_power`) at discordance psi and mean difference
    `effect` reaches POWER, searched from `start` (exact power saw-tooths in n, so the first n that reaches
    it is taken, not a bisection's)."""
    delta = min(abs(effect), psi)
    p_worse, p_better = (psi + delta) / 2, (psi - delta) / 2
    n = min(max(MIN_PAIRS, start), MAX_PAIRS)
    while mcnemar_power(n, p_worse, p_better, alpha) >= POWER and n > MIN_PAIRS:
        n = max(MIN_PAIRS, int(n * 0.8))  # the normal start may overshoot: step down until below
    while mcnemar_power(n, p_worse, p_better, alpha) < POWER and n < MAX_PAIRS:
        n += max(1, n // 50)
    while n > MIN_PAIRS and mcnemar_power(n - 1, p_worse, p_better, alpha) >= POWER:
        n -= 1  # the first n that reaches it, after the coarse steps
    return n


def t_power(n: int, sd: float, effect: float, alpha: float, per_cluster: float) -> float:
    """Exact power of the two-sided t-test at level `alpha` to find the target worse, n pairs in clusters of
    `per_cluster` (t with G − 1 degrees of freedom, G = ⌈n / per_cluster⌉ ≥ 2), where the mean difference
    has standard error sd / √n (sd: the SD of one pair's d with the clustering's design effect in it): the
    statistic is noncentral t with noncentrality |effect| √n / sd (scipy.stats.nct)."""
    if n < 2 or sd <= 0:
        return 0.0
    df = max(2, math.ceil(n / max(per_cluster, 1.0))) - 1
    crit = float(stats.t.isf(alpha / 2, df))
    return float(stats.nct.sf(crit, df, abs(effect) * math.sqrt(n) / sd))


def t_pairs_needed(sd: float, effect: float, alpha: float, per_cluster: float) -> int:
    """The fewest pairs whose `t_power` reaches POWER. Power grows with n (the noncentrality and the degrees
    of freedom both do), so a doubling then a bisection finds it."""
    low, high = MIN_PAIRS, MIN_PAIRS
    while t_power(high, sd, effect, alpha, per_cluster) < POWER:
        if high >= MAX_PAIRS:
            return MAX_PAIRS
        low, high = high, min(2 * high, MAX_PAIRS)
    if t_power(low, sd, effect, alpha, per_cluster) >= POWER:
        return low
    while high - low > 1:  # power(low) < POWER ≤ power(high)
        mid = (low + high) // 2
        low, high = (low, mid) if t_power(mid, sd, effect, alpha, per_cluster) >= POWER else (mid, high)
    return high


def family_level(level: float, family: int) -> float:
    """The level a gap's own test must reach to be confirmed whatever the other gaps of its BH family of
    `family` show: BH at `level` rejects every p ≤ level / m (the step-up finds at least that one), and no more
    than that when the others have p = 1 (too_few, or null gaps far from significance). So power at
    level / m is exact in that worst case and a lower bound in every other (other true gaps only help)."""
    return level / max(family, 1)


def written_power(written: int, keep: float, power_at: Callable[[int], float]) -> float:
    """Exact power of `written` pairs of which the checks keep each with probability `keep`: the mean of
    power_at(K) over K ~ Bin(written, keep) (the kept counts within 8 SD; the rest, < 1e-15 of the mass, count
    as power 0)."""
    if keep >= 1.0:
        return power_at(written)
    if keep <= 0.0 or written <= 0:
        return 0.0
    sd = math.sqrt(written * keep * (1 - keep))
    low, high = max(0, math.floor(written * keep - 8 * sd)), min(written, math.ceil(written * keep + 8 * sd))
    kept = np.arange(low, high + 1)
    weights = stats.binom.pmf(kept, written, keep)
    return float(sum(w * power_at(int(k)) for k, w in zip(kept, weights, strict=True) if w > 1e-15))


def pairs_to_write(needed: int, keep: float, power_at: Callable[[int], float]) -> int:
    """The fewest pairs to write (about: steps of 0.5%) whose `written_power` reaches POWER, searched up from
    needed / keep (the mean kept count is then `needed`, but power is concave there, so the mean of it falls
    short: a few more pairs make up for it)."""
    if keep >= 1.0:
        return needed
    n = min(MAX_PAIRS, math.ceil(needed / max(keep, 1e-6)))
    while n < MAX_PAIRS and written_power(n, keep, power_at) < POWER:
        n += max(1, n // 200)
    return n


def mcnemar_mde(n: int, psi: float, alpha: float) -> float | None:
    """The smallest mean difference |δ| that n pairs confirm with POWER by McNemar's exact test at `alpha`
    (`mcnemar_power`), at discordance max(psi, |δ|) (at least |δ| of the pairs must differ); by bisection on
    δ, which power increases with. None when no δ ≤ 1 reaches it (too few pairs)."""

    def power(delta: float) -> float:
        disc = max(psi, delta)
        return mcnemar_power(n, (disc + delta) / 2, (disc - delta) / 2, alpha)

    if n < MIN_PAIRS or power(1.0) < POWER:
        return None
    low, high = 0.0, 1.0
    for _ in range(MDE_STEPS):
        mid = (low + high) / 2
        low, high = (low, mid) if power(mid) >= POWER else (mid, high)
    return high


def t_mde(n: int, sd: float, alpha: float, per_cluster: float) -> float | None:
    """The smallest |effect| that n pairs confirm with POWER by the cluster-robust t-test (`t_power`), by
    bisection up to 1 (scores lie in [0, 1]); None when none does."""
    if n < 2 or sd <= 0 or t_power(n, sd, 1.0, alpha, per_cluster) < POWER:
        return None
    low, high = 0.0, 1.0
    for _ in range(MDE_STEPS):
        mid = (low + high) / 2
        low, high = (low, mid) if t_power(n, sd, mid, alpha, per_cluster) >= POWER else (mid, high)
    return high
