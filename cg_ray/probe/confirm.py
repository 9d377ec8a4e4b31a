"""Each probed gap confirmed, refuted or left unsettled on the fresh item pairs of one probe (docs/probe.md).

Per answered pair d = target score − control score; a gap is real when its targets score below their
controls (d < 0). Pairs written by one generator request share its quirks, so the request is the cluster.

The test of each gap, on this probe's pairs only (never pooled with an earlier probe's):
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
Then Benjamini–Hochberg (statsmodels `multipletests`, fdr_bh) over every gap the probe planned, at level
share(k) · fdr for the run's probe k (`power.share`: alpha-spending over the run's probes); a planned gap
with too few pairs is in that family with p = 1. The q shown is the BH q-value over share(k), so
"confirmed ⇔ q ≤ fdr" reads the same in every probe.

The interval is the (1 − share(k) · fdr) interval of the paired difference, not BH-adjusted: every probed
gap gets one (no selection), and unselected marginal intervals keep the expected share of intervals that
miss their effect — the false-coverage rate — at that level (Benjamini & Yekutieli 2005 adjust only for
selection). At the probe's share, not at fdr, so that re-probing a real gap until one probe's interval
"rules it out" (refuted) is bounded as re-probing a null one until it confirms is: by Σ share(k) · fdr / 2.
With one 0/1 pair per request it is Agresti & Min's (2005) interval for matched proportions (Wald after
adding ½ to each cell of the 2×2 table), otherwise mean ± t·SE, the SE floored at that shrunk
independent-pairs SE so a sample with no spread (all d equal) does not claim certainty.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from cg_ray.arrays import FloatArray
from cg_ray.probe.power import (
    MIN_PAIRS,
    POWER,
    family_level,
    mcnemar_mde,
    mcnemar_pairs_needed,
    mcnemar_power,
    pairs_to_write,
    share,
    t_mde,
    t_pairs_needed,
    t_power,
)
from cg_ray.probe.selection import Inflation

FDR = 0.05  # the probe confirms: the usual 5% false-discovery rate, not an exploratory one
MIN_REQUESTS = 2  # one request is one cluster: nothing to estimate its variance from
DEFAULT_EFFECT = -0.15  # stands in for the run's effect when it reported none
PAIR_COLUMNS = ("gap_id", "pair_id", "request_id", "target_score", "control_score")

# What every output says of the rule (the CLI, the report and the API quote these).
PROBE_DECISION = (
    "confirmed ⇔ q ≤ fdr and difference < 0 (the target items score below their matched controls); "
    "reversed ⇔ q ≤ fdr and difference > 0; refuted ⇔ neither, the probe's interval of the difference "
    "holds 0 and lies wholly above the run's held-out effect (the fresh pairs rule out a gap as large as the run "
    f"reported; {DEFAULT_EFFECT} stands in where it reported none); unsettled otherwise, with the new pairs the "
    f"next probe needs for {POWER:.0%} power at its level in a family as large as this one; too_few ⇔ under "
    f"{MIN_PAIRS} pairs or all from one generator request. Probe k spends the share β_k of fdr (β_1 = 0.8, "
    "β_k = 0.2/(k(k−1)) after: 0.1, 0.033, 0.017, …, summing to 1), k one more than any earlier probe of the "
    "run or of its gaps in the probe ledger (keyed by the rows and each gap's rule, so a copy, a new folder or "
    "--overwrite does not start again at 1; one fdr per gap there): q is Benjamini–Hochberg at level β_k·fdr "
    "over every gap that probe "
    "planned (a too_few gap counts with p = 1), each tested on that probe's fresh pairs only, divided by β_k; "
    "the interval is the (1 − β_k·fdr) one. Earlier probes' verdicts are final: a gap stands confirmed once any "
    "of its probes confirmed it, else at its latest probe's verdict. p: McNemar's exact test (one 0/1 pair "
    "per request) or a cluster-robust t-test (requests as clusters)"
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
    ci_low: float | None  # the (1 − share · fdr) interval of the difference (module docstring)
    ci_high: float | None
    p_value: float | None
    q_value: float | None  # the BH q-value within the probe over its share (module docstring)
    verdict: str  # one of VERDICTS, by PROBE_DECISION
    run_effect: float | None  # the run's held-out effect (None: it reported none)
    # The |difference| this many pairs confirm with 80% exact power at this probe's level in its family (worst
    # case: power.family_level); None when no difference ≤ 1 would.
    mde: float | None
    pairs_needed: int | None  # unsettled only: fresh answered pairs for 80% power in the next probe, in a family
    method: str  # "mcnemar_exact", "cluster_t" or "" (not tested)
    note: str
    fdr_share: float | None = None  # the share β_k of fdr this probe spent (power.share)
    pairs_to_write: int | None = None  # unsettled only: --pairs for that power when the checks drop as here
    planned_effect: float | None = None  # the effect pairs_needed is planned for (selection.py), None: untested


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


def mcnemar_test(target: FloatArray, control: FloatArray, level: float) -> PairedTest:
    """One 0/1 pair per request: McNemar's exact test and Agresti–Min's (1 − level) interval."""
    worse = int(np.sum((target == 0) & (control == 1)))
    better = int(np.sum((target == 1) & (control == 0)))
    table = [[0, worse], [better, 0]]  # only the discordant cells enter the test
    p = float(mcnemar(table, exact=True).pvalue) if worse + better else 1.0
    centre, se = _shrunk_se(target - control)
    z = float(stats.norm.isf(level / 2))
    low, high = max(-1.0, centre - z * se), min(1.0, centre + z * se)
    discordant = (worse + better) / max(target.size, 1)
    return PairedTest(float(np.mean(target - control)), se, min(1.0, p), low, high, "mcnemar_exact", discordant)


def cluster_test(d: FloatArray, clusters: np.ndarray, level: float) -> PairedTest:
    """The mean of d with a CR1 cluster-robust SE (statsmodels), floored at the shrunk independent-pairs SE,
    and t with G − 1 degrees of freedom (G the clusters); the (1 − level) interval."""
    fit = sm.OLS(d, np.ones(d.size)).fit(cov_type="cluster", cov_kwds={"groups": clusters}, use_t=True)
    se = max(float(fit.bse[0]), _shrunk_se(d)[1])  # the floor: see the module docstring
    df = int(np.unique(clusters).size) - 1
    mean = float(d.mean())
    p = float(2 * stats.t.sf(abs(mean) / se, df)) if se > 0 else (1.0 if mean == 0 else 0.0)
    t = float(stats.t.isf(level / 2, df))
    return PairedTest(mean, se, min(1.0, p), max(-1.0, mean - t * se), min(1.0, mean + t * se), "cluster_t")


def paired_test(target: FloatArray, control: FloatArray, clusters: np.ndarray, level: float) -> PairedTest:
    """McNemar where each request wrote one 0/1 pair, the cluster-robust t-test otherwise; the interval at
    1 − level (the probe's share of fdr)."""
    single = np.unique(clusters).size == clusters.size
    binary = bool(np.isin(target, (0.0, 1.0)).all() and np.isin(control, (0.0, 1.0)).all())
    if single and binary:
        return mcnemar_test(target, control, level)
    return cluster_test(target - control, clusters, level)


def mde(test: PairedTest, n: int, clusters: int, level: float) -> float | None:
    """The |difference| these n pairs in `clusters` requests confirm with POWER at `level`, two-sided, by the
    test's exact power inverted (`power.mcnemar_mde` at the pilot's discordance, `power.t_mde` at its SD and
    pairs per request); None when no difference ≤ 1 would."""
    if test.method == "mcnemar_exact" and test.discordance is not None:
        return mcnemar_mde(n, test.discordance, level)
    return t_mde(n, test.se * math.sqrt(n), level, n / max(clusters, 1))


def _planning_sd(test: PairedTest, n: int, effect: float) -> float:
    """The SD of one pair's d: the test's SE × √n (clustering counts), floored at √(|δ|(1 − |δ|)), the least SD
    0/1 pairs with mean difference δ can have, since a few pairs can show no spread by chance."""
    return max(test.se * math.sqrt(n), math.sqrt(abs(effect) * (1.0 - min(abs(effect), 1.0))))


def power_at(test: PairedTest, n: int, clusters: int, effect: float, level: float) -> Callable[[int], float]:
    """The exact power of k fresh pairs at |effect| and `level`, as a function of k, planned from this pilot
    of n pairs (`pairs_needed` says how)."""
    if test.method != "mcnemar_exact" or test.discordance is None:
        sd, per_cluster = _planning_sd(test, n, effect), n / max(clusters, 1)
        return lambda k: t_power(k, sd, effect, level, per_cluster)
    psi = min(1.0, max(test.discordance, abs(effect)))
    delta = min(abs(effect), psi)
    return lambda k: mcnemar_power(k, (psi + delta) / 2, (psi - delta) / 2, level)


def pairs_needed(
    test: PairedTest, n: int, clusters: int, effect: float, level: float, *, family: int = 1, keep: float = 1.0
) -> tuple[int, int]:
    """(answered pairs, pairs to write) for POWER at |effect| in a BH family of `family` gaps at `level` (the
    worst case, power.family_level), two-sided, planned from this pilot of n pairs in `clusters` requests,
    the checks keeping each written pair with probability `keep` (power.pairs_to_write). McNemar's test: the
    pairs its exact power needs (`power.mcnemar_pairs_needed`) at the pilot's discordance rate, floored at
    |effect| (at least that share of pairs must be discordant). The cluster-robust t-test: the noncentral t's
    exact power (`power.t_pairs_needed`) with the pilot's pairs per request and `_planning_sd`."""
    alpha = family_level(level, family)
    sd = _planning_sd(test, n, effect)
    if test.method != "mcnemar_exact" or test.discordance is None:
        needed = t_pairs_needed(sd, effect, alpha, n / max(clusters, 1))
    else:
        z = float(stats.norm.isf(alpha / 2) + stats.norm.ppf(POWER))
        start = max(math.ceil((z * sd / abs(effect)) ** 2), MIN_PAIRS)  # the normal formula: where to search from
        needed = mcnemar_pairs_needed(min(1.0, max(test.discordance, abs(effect))), effect, alpha, start)
    return needed, pairs_to_write(needed, keep, power_at(test, n, clusters, effect, alpha))


def family_q(p_values: Sequence[float], probe: int, fdr: float) -> list[float]:
    """q-values of one probe's family: Benjamini–Hochberg at level share(probe) · fdr over every gap the probe
    planned (p = 1 for one not tested), divided by the share and capped at 1, so q ≤ fdr ⇔ BH rejects."""
    if not p_values:
        return []
    q = multipletests(list(p_values), alpha=share(probe) * fdr, method="fdr_bh")[1]
    return [min(1.0, float(v) / share(probe)) for v in q]


def verdict(test: PairedTest, q: float, effect: float, fdr: float) -> str:
    """The verdict of one tested gap by PROBE_DECISION (its interval is at the probe's level)."""
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


def effect_said(effect: float, reported: bool) -> str:
    return f"the run's effect {effect:+.3f}" if reported else f"the default effect {effect:+.3f} (run gave none)"


@dataclass(frozen=True)
class NextPlan:
    """An unsettled gap's next probe: answered pairs needed, pairs to write, the effect planned for, and the
    note every output shows."""

    needed: int
    write: int
    effect: float
    note: str


def plan_next(
    tested: PairedTest,
    frame: pd.DataFrame,
    dropped: int,
    effect: float | None,
    inflation: Inflation | None,
    fdr: float,
    next_probe: int,
    family: int,
) -> NextPlan:
    """The pairs an unsettled gap, tested on `frame` (this probe's answered pairs; `dropped` more were written
    and dropped by the checks), needs in the next probe `next_probe`, in a family of `family` gaps, for the
    run's held-out effect (else DEFAULT_EFFECT), deflated by `inflation` where the run's confirmation inflated
    it (selection.py)."""
    n, clusters = len(frame), int(frame["request_id"].nunique())
    aim = effect if effect else DEFAULT_EFFECT
    said = effect_said(aim, bool(effect))
    if inflation is not None and effect:
        aim, said = inflation.planned, inflation.text(effect)
    keep = n / (n + dropped) if n + dropped else 1.0
    level = share(next_probe) * fdr
    needed, write = pairs_needed(tested, n, clusters, aim, level, family=family, keep=keep)
    where = f"BH over {family} gaps: level {family_level(level, family):.2g} for each, the worst case"
    note = (
        f"about {needed} new answered pairs in the next probe (probe {next_probe}) for {POWER:.0%} power at level "
        f"{level:.2g} (share {share(next_probe):.3g} of fdr {fdr:g}; {where}; two-sided) to detect {said}; "
        f"write about {write} (--pairs {write}: the checks kept {n} of {n + dropped} here)"
    )
    return NextPlan(needed, write, aim, note)


def _judged(
    gap_id: str,
    frame: pd.DataFrame,
    dropped: int,
    effect: float | None,
    tested: PairedTest | None,
    q: float,
    fdr: float,
    probe: int,
    inflation: Inflation | None = None,
    family: int = 1,
) -> GapConfirmation:
    """One gap's record: `too_few` when it was not tested, else its verdict by PROBE_DECISION; an unsettled
    one planned for the next probe in a family of `family` gaps (as this one's)."""
    n = len(frame)
    t = float(frame["target_score"].mean()) if n else None
    c = float(frame["control_score"].mean()) if n else None
    clusters = int(frame["request_id"].nunique())
    base = GapConfirmation(
        gap_id=gap_id, n_pairs=n, n_clusters=clusters, n_dropped=dropped, target_mean=t, control_mean=c,
        difference=None if t is None or c is None else t - c, ci_low=None, ci_high=None, p_value=None,
        q_value=None, verdict="too_few", run_effect=effect, mde=None, pairs_needed=None, method="",
        note=f"{n} pairs, under {MIN_PAIRS}" if n < MIN_PAIRS else "all pairs from one generator request",
        fdr_share=share(probe),
    )  # fmt: skip
    if tested is None:
        return base
    aim = effect if effect else DEFAULT_EFFECT  # None or 0: nothing to refute or plan for
    found = verdict(tested, q, aim, fdr)
    plan, note = None, ""
    if found == "refuted":
        said = effect_said(aim, bool(effect))
        note = f"the interval holds 0 and excludes {said}: rules out a gap as large as the run reported"
    if found == "unsettled":  # planned for the run's next probe, at its share of fdr
        plan = plan_next(tested, frame, dropped, effect, inflation, fdr, probe + 1, family)
        note = plan.note
    return replace(
        base, difference=tested.difference, ci_low=tested.low, ci_high=tested.high, p_value=tested.p_value,
        q_value=q, verdict=found, mde=mde(tested, n, clusters, family_level(share(probe) * fdr, family)),
        pairs_needed=None if plan is None else plan.needed, pairs_to_write=None if plan is None else plan.write,
        planned_effect=None if plan is None else plan.effect, method=tested.method, note=note,
    )  # fmt: skip


def _validate(pairs: pd.DataFrame) -> None:
    missing = [c for c in PAIR_COLUMNS if c not in pairs.columns]
    if missing:
        raise ValueError(f"pairs lack columns {missing}")
    scores = pairs[["target_score", "control_score"]].to_numpy(dtype=np.float64)
    if not (np.isfinite(scores).all() and (scores >= 0).all() and (scores <= 1).all()):
        raise ValueError("scores must be finite and in [0, 1]")
    if pairs["pair_id"].duplicated().any():
        raise ValueError("pair_id repeats")


def gap_test(frame: pd.DataFrame, level: float) -> PairedTest | None:
    """The test of one gap's pairs (PAIR_COLUMNS) at interval level 1 − level; None with too few to test."""
    if len(frame) < MIN_PAIRS or frame["request_id"].nunique() < MIN_REQUESTS:
        return None
    t = frame["target_score"].to_numpy(dtype=np.float64)
    c = frame["control_score"].to_numpy(dtype=np.float64)
    return paired_test(t, c, frame["request_id"].to_numpy(), level)


def confirm_gaps(
    pairs: pd.DataFrame,
    effects: Mapping[str, float | None],
    dropped: Mapping[str, int] | None = None,
    fdr: float = FDR,
    probe: int = 1,
    inflation: Mapping[str, Inflation | None] | None = None,
) -> list[GapConfirmation]:
    """Every gap the run's probe number `probe` planned (`effects`: gap_id → the run's held-out effect, e.g.
    {g.gap_id: g.effect for g in gaps}; the family) judged on its fresh answered pairs (PAIR_COLUMNS; scores
    in [0, 1]), in the order of `effects`. `dropped`: gap_id → pairs the checks threw away. A gap with no
    pairs is `too_few` (and in the family with p = 1); pairs of gaps not in `effects` are an error."""
    _validate(pairs)
    stray = set(pairs["gap_id"]) - set(effects)
    if stray:
        raise ValueError(f"pairs of gaps not probed: {sorted(stray)[:5]}")
    dropped = dropped or {}
    empty = pairs.iloc[:0]
    groups = {k: g for k, g in pairs.groupby("gap_id", sort=False)}
    tested = {gap_id: gap_test(groups.get(gap_id, empty), share(probe) * fdr) for gap_id in effects}
    q = family_q([1.0 if t is None else t.p_value for t in tested.values()], probe, fdr)
    return [
        _judged(
            gap_id,
            groups.get(gap_id, empty),
            dropped.get(gap_id, 0),
            effect,
            tested[gap_id],
            q_gap,
            fdr,
            probe,
            (inflation or {}).get(gap_id),
            len(effects),
        )
        for (gap_id, effect), q_gap in zip(effects.items(), q, strict=True)
    ]


def confirmation_table(confirmations: list[GapConfirmation]) -> pd.DataFrame:
    """The confirmations as one row per gap, columns in the order of GapConfirmation."""
    columns = list(GapConfirmation.__dataclass_fields__)
    table = pd.DataFrame([asdict(c) for c in confirmations], columns=columns)
    return table.astype({"pairs_needed": "Int64"})  # None stays missing, not a float NaN
