"""The probe's confirmation statistics, checked by simulation: seeded, so each count below is reproducible,
and each bound is one the rule could miss (a wrong test, interval or adjustment shows here)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from cg_ray.probe.confirm import (
    DECISION,
    DEFAULT_EFFECT,
    FDR,
    VERDICTS,
    GapConfirmation,
    confirm_gaps,
    confirmation_table,
    mcnemar_power,
    paired_test,
    planning,
)

REPLICATIONS = 400


def simulate(
    rng: np.random.Generator,
    gap_id: str,
    n: int,
    p_target: float,
    p_control: float,
    per_request: int = 1,
    spread: float = 0.0,
) -> pd.DataFrame:
    """n pairs of 0/1 scores (1 = correct). `per_request` pairs per generator request, each request with its
    own logit shifts of the target and of the control (SD `spread`): the pairs of one request correlate."""
    requests = np.arange(n) // per_request
    g = requests.max() + 1
    logit = stats.logistic.ppf
    shift_t, shift_c = rng.normal(0, spread, g)[requests], rng.normal(0, spread, g)[requests]
    target = rng.random(n) < stats.logistic.cdf(logit(p_target) + shift_t)
    control = rng.random(n) < stats.logistic.cdf(logit(p_control) + shift_c)
    return pd.DataFrame(
        {
            "gap_id": gap_id,
            "pair_id": [f"{gap_id}/{i}" for i in range(n)],
            "request_id": [f"{gap_id}:r{r}" for r in requests],
            "target_score": target.astype(float),
            "control_score": control.astype(float),
        }
    )


def judge(frame: pd.DataFrame, effects: dict[str, float | None], fdr: float = FDR) -> dict[str, GapConfirmation]:
    return {c.gap_id: c for c in confirm_gaps(frame, effects, fdr=fdr)}


# BH over two gaps puts the real one at about half the level (q = 2p when the null p is larger). There, by exact
# enumeration of the discordant counts, McNemar's exact test has power 0.89 at 40 pairs (the mid-p 0.92; no
# valid paired test does much better: seeds 2 and 10 draw 7 vs 16 and 4 vs 13 discordant pairs), so 19/20
# would hold well under half the time: the bound is Bin(20, 0.89)'s 5th percentile. At 60 pairs it is 0.99.
@pytest.mark.parametrize(("pairs", "at_least"), [(40, 16), (60, 19)])
def test_calibration_a_real_gap_is_confirmed_a_null_one_is_not(pairs: int, at_least: int) -> None:
    real = null = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        frame = pd.concat([simulate(rng, "mode:1", pairs, 0.4, 0.8), simulate(rng, "mode:2", pairs, 0.8, 0.8)])
        out = judge(frame, {"mode:1": -0.4, "mode:2": -0.2})
        real += out["mode:1"].verdict == "confirmed"
        null += out["mode:2"].verdict == "confirmed"
        assert out["mode:1"].method == "mcnemar_exact"
    print(f"{pairs} pairs, confirmed: real gap {real}/20, null gap {null}/20")
    assert real >= at_least
    assert null <= 1


def test_refuted_when_the_fresh_pairs_show_no_difference() -> None:
    out = judge(simulate(np.random.default_rng(3), "concept:7", 300, 0.7, 0.7), {"concept:7": -0.30})
    gap = out["concept:7"]
    assert gap.verdict == "refuted", gap
    assert gap.ci_low is not None and gap.ci_low > -0.30
    assert gap.ci_high is not None and gap.ci_low <= 0 <= gap.ci_high
    assert "holds 0 and excludes the run's effect -0.300" in gap.note
    # the same data do not refute a claim of a gap inside the interval
    small = judge(simulate(np.random.default_rng(3), "concept:7", 300, 0.7, 0.7), {"concept:7": -0.02})
    assert small["concept:7"].verdict == "unsettled"


def test_an_interval_that_shows_the_gap_is_never_refuted() -> None:
    """40 pairs, 9 worse and 2 better, run effect -0.4: McNemar p = 0.065 > fdr 0.05, but Agresti–Min's
    interval lies wholly below 0. The old rule called this "refuted" (its low end is above -0.4); a user who
    drops a gap on that word drops a real one. It is unsettled, with the pairs needed."""
    target = np.array([0.0] * 9 + [1.0] * 2 + [1.0] * 29)
    control = np.array([1.0] * 9 + [0.0] * 2 + [1.0] * 29)
    frame = pd.DataFrame(
        {"gap_id": "mode:1", "pair_id": [f"p{i}" for i in range(40)], "request_id": [f"r{i}" for i in range(40)],
         "target_score": target, "control_score": control}
    )  # fmt: skip
    gap = judge(frame, {"mode:1": -0.4})["mode:1"]
    assert gap.p_value == pytest.approx(0.0654, abs=1e-3) and gap.q_value is not None and gap.q_value > FDR
    assert gap.ci_high is not None and gap.ci_high < 0 and gap.ci_low is not None and gap.ci_low > -0.4
    assert gap.verdict == "unsettled" and gap.pairs_needed is not None


def _width_ratio(spread: float, seeds: int = 40) -> float:
    """Mean cluster-robust interval width over the naive one (pairs taken as independent), 10 requests × 6."""
    ratios = []
    for seed in range(seeds):
        pairs = simulate(np.random.default_rng(seed), "g", 60, 0.7, 0.7, per_request=6, spread=spread)
        gap = judge(pairs, {"g": -0.2})["g"]
        assert gap.method == "cluster_t" and gap.n_clusters == 10
        assert gap.ci_low is not None and gap.ci_high is not None
        d = (pairs["target_score"] - pairs["control_score"]).to_numpy()
        naive = 2 * stats.t.isf(FDR / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
        ratios.append((gap.ci_high - gap.ci_low) / naive)
    return float(np.mean(ratios))


def test_clustered_interval_is_wider_than_the_naive_one() -> None:
    clustered, independent = _width_ratio(spread=2.5), _width_ratio(spread=0.0)
    print(f"interval width / naive width: {clustered:.2f} with correlated requests, {independent:.2f} without")
    # without correlation it is ~1.2 (t with 9 df rather than 59 adds 13%, a CR1 SE from 10 clusters is noisy)
    assert independent < 1.3
    assert clustered > 1.4 * independent


def test_clustered_null_keeps_its_false_positive_rate() -> None:
    sims, ours, naive = 200, 0, 0
    for seed in range(sims):
        pairs = simulate(np.random.default_rng(seed), "g", 40, 0.7, 0.7, per_request=5, spread=2.0)
        gap = judge(pairs, {"g": -0.2})["g"]
        ours += gap.verdict in ("confirmed", "reversed")  # any significant difference is a false positive
        d = (pairs["target_score"] - pairs["control_score"]).to_numpy()
        naive += d.std() > 0 and stats.ttest_1samp(d, 0.0).pvalue <= FDR
    print(f"null, 8 requests × 5 pairs: significant {ours}/{sims} (cluster-robust), {naive}/{sims} (naive t)")
    # binomial slack: at a rate of fdr, 200 draws exceed 19 with probability < 0.5%
    assert ours <= stats.binom.ppf(0.995, sims, FDR)
    assert naive > 2 * ours  # the simulation does correlate pairs: ignoring it would fail


def test_reversed_direction_is_not_confirmed() -> None:
    gap = judge(simulate(np.random.default_rng(1), "mode:4", 60, 0.9, 0.4), {"mode:4": -0.2})["mode:4"]
    assert gap.difference is not None and gap.difference > 0
    assert gap.q_value is not None and gap.q_value <= FDR
    assert gap.verdict == "reversed"


def test_pairs_needed_gives_about_the_promised_power() -> None:
    pilot = judge(simulate(np.random.default_rng(0), "g", 30, 0.6, 0.75), {"g": -0.15})["g"]
    assert pilot.verdict == "unsettled" and pilot.pairs_needed is not None and pilot.pairs_needed > 30
    assert f"{pilot.pairs_needed - 30} more" in pilot.note


# (target right, control right): six settings of discordance and effect, as probes meet them.
POWER_SETTINGS = [(0.6, 0.75), (0.5, 0.7), (0.7, 0.8), (0.3, 0.6), (0.55, 0.65), (0.2, 0.45)]


@pytest.mark.parametrize(("p_target", "p_control"), POWER_SETTINGS)
def test_planned_pairs_give_the_promised_power_exactly_and_in_400_replications(
    p_target: float, p_control: float
) -> None:
    """Plan from a large pilot (its discordance is then the true one), then: the exact McNemar power at the
    planned n is in [0.78, 0.85] (the normal formula gave 0.69–0.76), and 400 simulated probes of that size
    reject on the target's side at a rate inside the 99.9% binomial band of that exact power (so the
    enumeration is right)."""
    effect = p_target - p_control
    big = simulate(np.random.default_rng(1), "g", 20_000, p_target, p_control)
    t, c = big["target_score"].to_numpy(), big["control_score"].to_numpy()
    test = paired_test(t, c, big["request_id"].to_numpy(), FDR)
    _, n = planning(test, len(big), effect, FDR)
    # independent target and control: discordant with p_t(1−p_c) + p_c(1−p_t); worse when target 0, control 1
    p_worse, p_better = (1 - p_target) * p_control, p_target * (1 - p_control)
    exact = mcnemar_power(n, p_worse, p_better, FDR)
    assert 0.78 <= exact <= 0.85, (n, exact)
    rng = np.random.default_rng(1000)
    hits = 0
    for _ in range(REPLICATIONS):  # McNemar's exact test as statsmodels runs it, one gap (q = p)
        target, control = rng.random(n) < p_target, rng.random(n) < p_control
        worse, better = int(np.sum(~target & control)), int(np.sum(target & ~control))
        p = mcnemar([[0, worse], [better, 0]], exact=True).pvalue if worse + better else 1.0
        hits += int(p <= FDR and worse > better)
    low, high = stats.binom.ppf([0.0005, 0.9995], REPLICATIONS, exact)
    print(f"{p_target} vs {p_control}: planned {n} pairs, exact power {exact:.3f}, confirmed {hits}/{REPLICATIONS}")
    assert low <= hits <= high


def test_edge_cases() -> None:
    rows = 12
    same = pd.DataFrame(
        {
            "gap_id": ["flat"] * rows + ["one"] * rows + ["down"] * rows,
            "pair_id": [f"p{i}" for i in range(3 * rows)],
            "request_id": [f"r{i}" for i in range(rows)] + ["only"] * rows + [f"q{i // 3}" for i in range(rows)],
            "target_score": [1.0] * rows + [0.0] * rows + [0.0] * rows,
            "control_score": [1.0] * rows + [1.0] * rows + [1.0] * rows,
        }
    )
    out = judge(same, {"flat": None, "one": -0.3, "down": -0.3, "none": -0.1})
    flat = out["flat"]  # zero variance, no difference: a finite interval around 0, never certainty
    assert flat.difference == 0 and flat.p_value == 1.0
    assert flat.ci_low is not None and flat.ci_high is not None and flat.ci_low < 0 < flat.ci_high
    assert "default effect" in flat.note and flat.run_effect is None
    assert flat.verdict == ("refuted" if flat.ci_low > DEFAULT_EFFECT else "unsettled")
    assert out["one"].verdict == "too_few" and "one generator request" in out["one"].note
    down = out["down"]  # zero variance in clusters of 3: the floor keeps the SE finite and the test valid
    assert down.method == "cluster_t" and down.verdict == "confirmed" and down.ci_high is not None
    assert down.ci_high < 0
    assert out["none"].verdict == "too_few" and out["none"].n_pairs == 0
    table = confirmation_table(list(out.values()))
    assert list(table["gap_id"]) == ["flat", "one", "down", "none"]
    assert {"difference", "ci_low", "q_value", "verdict", "pairs_needed", "note"} <= set(table.columns)


def test_bad_input_is_refused() -> None:
    pairs = simulate(np.random.default_rng(0), "g", 10, 0.5, 0.5)
    with pytest.raises(ValueError, match="not probed"):
        confirm_gaps(pairs, {"other": -0.1})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        confirm_gaps(pairs.assign(target_score=2.0), {"g": -0.1})
    assert "confirmed ⇔ q ≤ fdr and difference < 0" in DECISION


pair = st.tuples(st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 1.0]), st.integers(0, 6))


@settings(max_examples=60, deadline=None)
@given(st.lists(pair, min_size=0, max_size=40), st.booleans())
def test_properties(rows: list[tuple[float, float, int]], binary: bool) -> None:
    frame = pd.DataFrame(
        {
            "gap_id": "g",
            "pair_id": [str(i) for i in range(len(rows))],
            "request_id": [str(r) for _, _, r in rows] if not binary else [str(i) for i in range(len(rows))],
            "target_score": [round(t) if binary else t for t, _, _ in rows],
            "control_score": [c for _, c, _ in rows],
        }
    )
    (gap,) = confirm_gaps(frame, {"g": -0.2})
    assert gap.verdict in VERDICTS and gap.n_pairs == len(rows)
    if gap.verdict == "too_few":
        return
    assert gap.p_value is not None and gap.q_value is not None and gap.q_value >= gap.p_value
    assert gap.ci_low is not None and gap.ci_high is not None and gap.difference is not None
    assert -1 <= gap.ci_low <= gap.difference <= gap.ci_high <= 1
    assert (gap.verdict == "confirmed") == (gap.q_value <= FDR and gap.difference < 0)
