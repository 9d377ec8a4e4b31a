"""Each probed gap confirmed, refuted or left unsettled on the fresh item pairs (docs/probe.md).

Per answered pair d = target score − control score; a gap is real when its targets score below their
controls (d < 0). Pairs written by one generator request share its quirks, so the request is the cluster.

The test of each gap:
- every request wrote one pair and the scores are 0/1: McNemar's exact test on the discordant pairs (the
  conditional binomial test; statsmodels `mcnemar(exact=True)`). A confirmation is what users act on, so its
  level is guaranteed, not approximate: the mid-p (Fagerland, Lydersen & Laake 2013) keeps the size nearer
  the nominal level and has more power at 20–100 pairs, but may exceed it; end to end, a null gap beside a
  real one was confirmed in 3 of 20 seeds with it (expected 0.6). The price is power, paid in pairs: the
  plan states the pairs needed, and a probe can always write more (the asymptotic χ² test is unreliable
  with few discordant pairs).
- otherwise (requests with several pairs, or graded scores): the mean of d with a cluster-robust (CR1)
  standard error (statsmodels OLS d ~ 1, cov_type="cluster") and t with G − 1 degrees of freedom, G the
  requests. With one pair per request this is the paired t-test.
Then Benjamini–Hochberg q-values over the gaps tested (statsmodels `multipletests`, fdr_bh).

The interval is the (1 − fdr) interval of the paired difference, not BH-adjusted: every probed gap gets
one (no selection), and unselected marginal intervals keep the expected share of intervals that miss their
effect — the false-coverage rate — at fdr (Benjamini & Yekutieli 2005 adjust only for selection). With one
0/1 pair per request it is Agresti & Min's (2005) interval for matched proportions (Wald after adding ½ to
each cell of the 2×2 table), otherwise mean ± t·SE, the SE floored at that shrunk independent-pairs SE so a
sample with no spread (all d equal) does not claim certainty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from cg_ray.arrays import FloatArray

FDR = 0.05  # the probe confirms: the usual 5% false-discovery rate, not an exploratory one
MIN_PAIRS = 5  # below this no test is run (a McNemar test on < 5 pairs cannot reach p < 0.05)
MIN_CLUSTERS = 2  # one request is one cluster: nothing to estimate its variance from
POWER = 0.8  # the power `pairs_needed` and `mde` are stated at
DEFAULT_EFFECT = -0.15  # stands in for the run's effect when it reported none
PAIR_COLUMNS = ("gap_id", "pair_id", "request_id", "target_score", "control_score")

# What every output says of the rule (the CLI, the report and the API quote these).
DECISION = (
    "confirmed ⇔ q ≤ fdr and difference < 0 (the target items score below their matched controls); "
    "reversed ⇔ q ≤ fdr and difference > 0; refuted ⇔ neither, the (1 − fdr) interval of the difference "
    "holds 0 and lies wholly above the run's effect (the fresh pairs rule out a gap as large as the run reported; "
    f"{DEFAULT_EFFECT} stands in where it reported none); unsettled otherwise, with the pairs needed for "
    f"{POWER:.0%} power; too_few ⇔ under {MIN_PAIRS} pairs or all from one generator request. q: "
    "Benjamini–Hochberg over every gap the run's probes tested (earlier probes' gaps judged again); "
    "p: McNemar's exact test (one 0/1 pair per request) or a "
    "cluster-robust t-test (requests as clusters)"
)
VERDICTS = ("confirmed", "reversed", "refuted", "unsettled", "too_few")


@dataclass(frozen=True)
class GapConfirmation:
    """One gap judged on its fresh pairs. Figures are None where it was not tested (too few pairs)."""

    gap_id: str
    n_pairs: int
    n_clusters: int
    n_dropped: int  # pairs the checks threw away before answering
    target_mean: float | None
    control_mean: float | None
    difference: float | None  # target − control: negative means the gap is real
    ci_low: float | None  # the (1 − fdr) interval of the difference (module docstring)
    ci_high: float | None
    p_value: float | None
    q_value: float | None
    verdict: str  # one of VERDICTS, by DECISION
    run_effect: float | None  # what the run reported (None: it reported none)
    mde: float | None  # the |difference| this many pairs would confirm with 80% power
    pairs_needed: int | None  # unsettled only: pairs for 80% power at the run's (or the default) effect
    method: str  # "mcnemar_exact", "cluster_t" or "" (not tested)
    note: str


@dataclass(frozen=True)
class PairedTest:
    """The test of one gap's pairs, before the multiplicity adjustment."""

    difference: float
    se: float
    p_value: float
    low: float
    high: float
    method: str
    discordance: float | None = None  # McNemar: the share of pairs whose target and control differ


def _shrunk_se(d: FloatArray) -> tuple[float, float]:
    """Agresti–Min's shrunk paired difference and its independent-pairs SE, for d in [−1, 1]: the pairs plus
    pseudo-pairs d = +1 (weight ½), −1 (weight ½) and 0 (weight 1) — for 0/1 scores exactly ½ added to each
    cell of the 2×2 table. Hand-written: neither statsmodels nor scipy has an interval for matched
    proportions."""
    n = d.size + 2.0
    centre = float(d.sum()) / n
    second = (float(d @ d) + 1.0) / n  # the mean of d² with the pseudo-pairs' ½·1 + ½·1
    return centre, math.sqrt(max(second - centre**2, 0.0) / n)


def mcnemar_test(target: FloatArray, control: FloatArray, fdr: float) -> PairedTest:
    """One 0/1 pair per request: McNemar's exact test and Agresti–Min's (1 − fdr) interval."""
    worse = int(np.sum((target == 0) & (control == 1)))
    better = int(np.sum((target == 1) & (control == 0)))
    table = [[0, worse], [better, 0]]  # only the discordant cells enter the test
    p = float(mcnemar(table, exact=True).pvalue) if worse + better else 1.0
    centre, se = _shrunk_se(target - control)
    z = float(stats.norm.isf(fdr / 2))
    low, high = max(-1.0, centre - z * se), min(1.0, centre + z * se)
    discordant = (worse + better) / max(target.size, 1)
    return PairedTest(float(np.mean(target - control)), se, min(1.0, p), low, high, "mcnemar_exact", discordant)


def cluster_test(d: FloatArray, clusters: np.ndarray, fdr: float) -> PairedTest:
    """The mean of d with a CR1 cluster-robust SE (statsmodels), floored at the shrunk independent-pairs SE,
    and t with G − 1 degrees of freedom (G the clusters)."""
    fit = sm.OLS(d, np.ones(d.size)).fit(cov_type="cluster", cov_kwds={"groups": clusters}, use_t=True)
    se = max(float(fit.bse[0]), _shrunk_se(d)[1])  # the floor: see the module docstring
    df = int(np.unique(clusters).size) - 1
    mean = float(d.mean())
    p = float(2 * stats.t.sf(abs(mean) / se, df)) if se > 0 else (1.0 if mean == 0 else 0.0)
    t = float(stats.t.isf(fdr / 2, df))
    return PairedTest(mean, se, min(1.0, p), max(-1.0, mean - t * se), min(1.0, mean + t * se), "cluster_t")


def paired_test(target: FloatArray, control: FloatArray, clusters: np.ndarray, fdr: float) -> PairedTest:
    """McNemar where each request wrote one 0/1 pair, the cluster-robust t-test otherwise."""
    single = np.unique(clusters).size == clusters.size
    binary = bool(np.isin(target, (0.0, 1.0)).all() and np.isin(control, (0.0, 1.0)).all())
    if single and binary:
        return mcnemar_test(target, control, fdr)
    return cluster_test(target - control, clusters, fdr)


def mcnemar_power(n: int, p_worse: float, p_better: float, alpha: float) -> float:
    """Exact power of McNemar's exact two-sided test at level `alpha` to find the target worse, with n pairs
    each discordant target-worse with probability p_worse and target-better with p_better: the sum over the
    discordant count D ~ Bin(n, p_worse + p_better) of P(the worse count W lands in the test's rejection
    region on the target-worse side | D), W | D ~ Bin(D, p_worse / (p_worse + p_better)). Enumerated, not
    simulated: O(n²) arithmetic, a few milliseconds at n = 500."""
    psi = p_worse + p_better
    if n <= 0 or psi <= 0:
        return 0.0
    share = p_worse / psi
    power = 0.0
    for d, weight in enumerate(stats.binom.pmf(np.arange(n + 1), n, psi)):
        if weight < 1e-12 or d == 0:
            continue
        w = np.arange(d + 1)
        p_two_sided = np.minimum(1.0, 2.0 * stats.binom.cdf(np.minimum(w, d - w), d, 0.5))
        reject = (p_two_sided <= alpha) & (w > d - w)  # significant, and the target worse
        power += weight * float(stats.binom.pmf(w[reject], d, share).sum())
    return power


def mcnemar_pairs_needed(psi: float, effect: float, alpha: float, start: int) -> int:
    """The fewest pairs whose exact McNemar power (`mcnemar_power`) at discordance psi and mean difference
    `effect` reaches POWER, searched upward from `start` (exact power saw-tooths in n, so the first n that
    reaches it is taken, not a bisection's)."""
    delta = min(abs(effect), psi)
    p_worse, p_better = (psi + delta) / 2, (psi - delta) / 2
    n = max(MIN_PAIRS, start)
    while mcnemar_power(n, p_worse, p_better, alpha) >= POWER and n > MIN_PAIRS:
        n = max(MIN_PAIRS, int(n * 0.8))  # the normal start overshoots: step down until below
    while mcnemar_power(n, p_worse, p_better, alpha) < POWER:
        n += max(1, n // 50)
    while n > MIN_PAIRS and mcnemar_power(n - 1, p_worse, p_better, alpha) >= POWER:
        n -= 1  # the first n that reaches it, after the coarse steps
    return n


def planning(test: PairedTest, n: int, effect: float, fdr: float) -> tuple[float, int]:
    """(mde at n pairs, pairs needed for POWER at |effect|), two-sided at level fdr (a planning figure, not a
    test). For McNemar's test the pairs needed are its exact power's (`mcnemar_pairs_needed`) at the pilot's
    discordance rate, floored at |effect| (at least that share of pairs must be discordant): the normal
    formula n = (z_{α/2} + z_β)² Var / δ² bought 70–76% power, not 80%. Otherwise (the cluster-robust
    t-test) the normal formula, with the SD of d the test's SE × √n so that clustering counts, floored at
    √(|δ|(1 − |δ|)), the least SD 0/1 pairs with mean difference δ can have, since a few pairs can show no
    spread by chance."""
    z = float(stats.norm.isf(fdr / 2) + stats.norm.ppf(POWER))
    sd = max(test.se * math.sqrt(n), math.sqrt(abs(effect) * (1.0 - min(abs(effect), 1.0))))
    normal = max(math.ceil((z * sd / abs(effect)) ** 2), MIN_PAIRS)
    if test.method != "mcnemar_exact" or test.discordance is None:
        return z * test.se, normal
    psi = min(1.0, max(test.discordance, abs(effect)))
    return z * test.se, mcnemar_pairs_needed(psi, effect, fdr, normal)


def _verdict(test: PairedTest, q: float, effect: float, fdr: float) -> str:
    if q <= fdr and test.difference < 0:
        return "confirmed"
    if q <= fdr and test.difference > 0:
        return "reversed"
    # refuted: the interval holds 0 (it does not itself show a gap) and rules out an effect as far from 0 as
    # the run's, on the run's side. An interval that excludes 0 on the gap's side while q > fdr shows a gap
    # that multiplicity left unconfirmed: that is unsettled, never refuted.
    holds_zero = test.low <= 0.0 <= test.high
    if holds_zero and ((effect < 0 and test.low > effect) or (effect > 0 and test.high < effect)):
        return "refuted"
    return "unsettled"


def _note(verdict: str, effect: float, reported: bool, n: int, needed: int | None) -> str:
    said = f"the run's effect {effect:+.3f}" if reported else f"the default effect {effect:+.3f} (run gave none)"
    if verdict == "refuted":
        return f"the interval holds 0 and excludes {said}: rules out a gap as large as the run reported"
    if verdict == "unsettled" and needed is not None:
        return f"about {needed} pairs ({max(needed - n, 0)} more) for {POWER:.0%} power to detect {said}"
    return ""


def _judged(
    gap_id: str,
    frame: pd.DataFrame,
    dropped: int,
    effect: float | None,
    tested: PairedTest | None,
    q: float,
    fdr: float,
) -> GapConfirmation:
    """One gap's record: `too_few` when it was not tested, else its verdict by DECISION."""
    n = len(frame)
    t = float(frame["target_score"].mean()) if n else None
    c = float(frame["control_score"].mean()) if n else None
    base = GapConfirmation(
        gap_id=gap_id,
        n_pairs=n,
        n_clusters=int(frame["request_id"].nunique()),
        n_dropped=dropped,
        target_mean=t,
        control_mean=c,
        difference=None if t is None or c is None else t - c,
        ci_low=None,
        ci_high=None,
        p_value=None,
        q_value=None,
        verdict="too_few",
        run_effect=effect,
        mde=None,
        pairs_needed=None,
        method="",
        note=f"{n} pairs, under {MIN_PAIRS}" if n < MIN_PAIRS else "all pairs from one generator request",
    )
    if tested is None:
        return base
    aim = effect if effect else DEFAULT_EFFECT  # None or 0: nothing to refute or plan for
    mde, needed = planning(tested, n, aim, fdr)
    verdict = _verdict(tested, q, aim, fdr)
    kept = needed if verdict == "unsettled" else None
    return replace(
        base,
        difference=tested.difference,
        ci_low=tested.low,
        ci_high=tested.high,
        p_value=tested.p_value,
        q_value=q,
        verdict=verdict,
        mde=mde,
        pairs_needed=kept,
        method=tested.method,
        note=_note(verdict, aim, bool(effect), n, kept),
    )


def _validate(pairs: pd.DataFrame) -> None:
    missing = [c for c in PAIR_COLUMNS if c not in pairs.columns]
    if missing:
        raise ValueError(f"pairs lack columns {missing}")
    scores = pairs[["target_score", "control_score"]].to_numpy(dtype=np.float64)
    if not (np.isfinite(scores).all() and (scores >= 0).all() and (scores <= 1).all()):
        raise ValueError("scores must be finite and in [0, 1]")
    if pairs["pair_id"].duplicated().any():
        raise ValueError("pair_id repeats")


def confirm_gaps(
    pairs: pd.DataFrame,
    effects: Mapping[str, float | None],
    dropped: Mapping[str, int] | None = None,
    fdr: float = FDR,
) -> list[GapConfirmation]:
    """Every gap of `effects` (gap_id → the run's effect, e.g. {g.gap_id: g.effect for g in gaps}) judged on
    its answered pairs (PAIR_COLUMNS; scores in [0, 1]), in the order of `effects`. `dropped`: gap_id → pairs
    the checks threw away. A gap with no pairs is `too_few`; pairs of gaps not in `effects` are an error."""
    _validate(pairs)
    stray = set(pairs["gap_id"]) - set(effects)
    if stray:
        raise ValueError(f"pairs of gaps not probed: {sorted(stray)[:5]}")
    dropped = dropped or {}
    groups = {k: g for k, g in pairs.groupby("gap_id", sort=False)}
    tested: dict[str, PairedTest] = {}
    for gap_id in effects:
        frame = groups.get(gap_id, pairs.iloc[:0])
        if len(frame) >= MIN_PAIRS and frame["request_id"].nunique() >= MIN_CLUSTERS:
            t = frame["target_score"].to_numpy(dtype=np.float64)
            c = frame["control_score"].to_numpy(dtype=np.float64)
            tested[gap_id] = paired_test(t, c, frame["request_id"].to_numpy(), fdr)
    q_values: dict[str, float] = {}
    if tested:
        q = multipletests([t.p_value for t in tested.values()], alpha=fdr, method="fdr_bh")[1]
        q_values = dict(zip(tested, (float(v) for v in q), strict=True))
    return [
        _judged(
            gap_id,
            groups.get(gap_id, pairs.iloc[:0]),
            dropped.get(gap_id, 0),
            effect,
            tested.get(gap_id),
            q_values.get(gap_id, 1.0),
            fdr,
        )
        for gap_id, effect in effects.items()
    ]


def confirmation_table(confirmations: list[GapConfirmation]) -> pd.DataFrame:
    """The confirmations as one row per gap, columns in the order of GapConfirmation."""
    columns = list(GapConfirmation.__dataclass_fields__)
    table = pd.DataFrame([asdict(c) for c in confirmations], columns=columns)
    return table.astype({"pairs_needed": "Int64"})  # None stays missing, not a float NaN
