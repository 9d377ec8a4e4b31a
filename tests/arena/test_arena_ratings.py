"""Rating sanity: win counts order the ratings, known BT strengths are recovered, Elo agrees, CIs cover the
truth, and tie policies act exactly as documented."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from cg_ray.arena.config import RatingsConfig, TiePolicy
from cg_ray.arena.outcomes import BOTHBAD, MODEL_A, MODEL_B, TIE, BattleArrays
from cg_ray.arena.ratings import NotIdentifiable, elo_ratings, fit_bradley_terry, pair_wins, rate

from .arena_builders import bt_battles

POINTS = 400 / np.log(10)  # rating points per unit of natural-log strength
FAST = RatingsConfig(bootstrap=0, elo_permutations=20)


def arrays(games: list[tuple[int, int, int]], models: list[str] | None = None) -> BattleArrays:
    a, b, w = (np.array(x, dtype=np.int64) for x in zip(*games, strict=True))
    m = int(max(a.max(), b.max())) + 1
    return BattleArrays(models or [f"m{i}" for i in range(m)], a, b, w)


def repeat(a: int, b: int, winner: int, n: int) -> list[tuple[int, int, int]]:
    return [(a, b, winner)] * n


def test_two_models_rating_gap_is_the_log_odds_of_the_win_share() -> None:
    # alpha beats beta 6 times, loses 2, ties 4: the BT MLE gap is 400·log10(wins / losses), ties as half-wins.
    games = repeat(0, 1, MODEL_A, 6) + repeat(0, 1, MODEL_B, 2) + repeat(1, 0, TIE, 4)
    r = rate(arrays(games, ["alpha", "beta"]), FAST)
    assert r.rating("alpha") - r.rating("beta") == pytest.approx(400 * np.log10(8 / 4), abs=1e-6)
    assert (r.rating("alpha") + r.rating("beta")) / 2 == pytest.approx(1000.0)
    assert r.predicted_win(0, 1) == pytest.approx(8 / 12)
    assert r.elo[0] > r.elo[1]
    assert r.counts["alpha"] == {"battles": 12, "wins": 6, "losses": 2, "ties": 4, "bothbad": 0}
    # Natural-log scale: scale 1, base e gives the log-odds themselves.
    natural = rate(arrays(games, ["alpha", "beta"]), RatingsConfig(bootstrap=0, scale=1.0, base=np.e, anchor_rating=0))
    assert natural.bt == pytest.approx([np.log(2) / 2, -np.log(2) / 2])


def test_tie_policies_change_ratings_exactly_as_documented() -> None:
    games = repeat(0, 1, MODEL_A, 6) + repeat(0, 1, MODEL_B, 2) + repeat(0, 1, TIE, 4) + repeat(1, 0, BOTHBAD, 3)
    battles = arrays(games, ["alpha", "beta"])

    def gap(policy: TiePolicy) -> float:
        r = rate(battles, FAST, policy)
        return r.rating("alpha") - r.rating("beta")

    # Default: ties half, bothbad dropped -> (6 + 2) / (2 + 2); the 15 battles are counted as 12.
    assert gap(TiePolicy()) == pytest.approx(400 * np.log10(8 / 4), abs=1e-6)
    assert rate(battles, FAST).n_counted == 12
    # Ties dropped -> 6 / 2.
    assert gap(TiePolicy(tie="drop")) == pytest.approx(400 * np.log10(6 / 2), abs=1e-6)
    # bothbad as a tie -> (6 + 3.5) / (2 + 3.5); "zero" cannot be expressed in BT and drops it.
    assert gap(TiePolicy(bothbad="half")) == pytest.approx(400 * np.log10(9.5 / 5.5), abs=1e-6)
    assert gap(TiePolicy(bothbad="zero")) == pytest.approx(gap(TiePolicy()), abs=1e-9)


def test_in_a_balanced_round_robin_more_wins_means_a_higher_rating() -> None:
    rng = np.random.default_rng(3)
    m, per_pair = 6, 15
    games = []
    for i in range(m):
        for j in range(i + 1, m):
            p = rng.uniform(0.15, 0.85)  # arbitrary, not BT-consistent results
            games += [(i, j, MODEL_A if rng.random() < p else MODEL_B) for _ in range(per_pair)]
    r = rate(arrays(games), FAST)
    wins = np.array([r.counts[name]["wins"] for name in r.models])
    # Every model played every other equally often: the BT MLE orders by total wins, ties in wins tie.
    for i in range(m):
        for j in range(m):
            if wins[i] > wins[j]:
                assert r.bt[i] > r.bt[j]
            elif wins[i] == wins[j]:
                assert r.bt[i] == pytest.approx(r.bt[j], abs=1e-6)


def test_recovers_known_strengths_and_elo_agrees() -> None:
    theta = [-1.2, -0.6, -0.1, 0.3, 0.8, 1.4]
    battles, th = bt_battles(theta, n=4000, seed=11)
    r = rate(battles, RatingsConfig(bootstrap=200, elo_permutations=50, seed=5))
    truth = 1000 + POINTS * (th - th.mean())
    # Tolerance: 40 points (≈ 0.23 in natural log, about 3.5 standard errors at ~1,300 battles per model).
    assert np.abs(r.bt - truth).max() < 40
    assert list(np.argsort(r.bt)) == list(np.argsort(truth))
    assert spearmanr(r.elo, r.bt).statistic == pytest.approx(1.0)
    # 95% percentile CIs: expect ~5.7 of 6 to cover; require 5.
    covered = (r.bt_lower <= truth) & (truth <= r.bt_upper)
    assert covered.sum() >= 5, (r.bt_lower, truth, r.bt_upper)
    assert np.all(r.bt_lower < r.bt) and np.all(r.bt < r.bt_upper)
    assert np.all(r.elo_lower < r.elo_upper)
    assert r.bootstrap_ok == 200 and r.bootstrap_failed == 0


def test_newton_fit_matches_the_classic_mm_iteration() -> None:
    battles, _ = bt_battles([0.0, 0.5, -0.4, 1.0, 0.2], n=600, seed=2, tie_prob=0.1)
    wins = pair_wins(battles.model_a, battles.model_b, np.array([1.0, 0.0, 0.5, np.nan])[battles.winner], 5)
    theta = fit_bradley_terry(wins)
    # Zermelo / Hunter MM: p_i <- W_i / Σ_j n_ij / (p_i + p_j), an independent route to the same MLE.
    games = wins + wins.T
    p = np.ones(5)
    for _ in range(5000):
        p = wins.sum(axis=1) / (games / (p[:, None] + p[None, :])).sum(axis=1)
        p /= np.exp(np.log(p).mean())
    assert theta == pytest.approx(np.log(p) - np.log(p).mean(), abs=1e-6)


def test_mle_that_does_not_exist_is_an_error_unless_a_prior_is_set() -> None:
    games = repeat(0, 1, MODEL_A, 5) + repeat(1, 2, MODEL_A, 3) + repeat(1, 2, MODEL_B, 2)  # m0 never lost
    with pytest.raises(NotIdentifiable, match="never lost"):
        rate(arrays(games), FAST)
    r = rate(arrays(games), RatingsConfig(bootstrap=0, elo_permutations=0, prior=1.0))
    assert np.all(np.isfinite(r.bt)) and r.bt[0] > r.bt[1] > r.bt[2]


def test_anchor_model_and_unrated_models() -> None:
    games = repeat(0, 1, MODEL_A, 6) + repeat(0, 1, MODEL_B, 3) + repeat(1, 2, MODEL_A, 4) + repeat(1, 2, MODEL_B, 4)
    games += repeat(2, 3, BOTHBAD, 2)  # m3's only battles are dropped: it has no rating
    battles = arrays(games)
    mean_anchored = rate(battles, FAST)
    anchored = rate(battles, RatingsConfig(bootstrap=0, elo_permutations=20, anchor_model="m1", anchor_rating=1200))
    assert anchored.rating("m1") == pytest.approx(1200.0)
    assert anchored.bt[:3] - anchored.bt[1] == pytest.approx(mean_anchored.bt[:3] - mean_anchored.bt[1])
    assert np.isnan(anchored.bt[3]) and np.isnan(anchored.elo[3])
    assert anchored.as_dict()["models"][-1] == {**anchored.as_dict()["models"][-1], "model": "m3", "bt": None}
    with_ci = rate(battles, RatingsConfig(bootstrap=30, elo_permutations=5))
    assert np.isnan(with_ci.bt_lower[3]) and np.isnan(with_ci.elo_upper[3]) and not np.isnan(with_ci.bt_lower[:3]).any()
    with pytest.raises(ValueError, match="no battle left"):
        rate(battles, RatingsConfig(bootstrap=0, anchor_model="m3"))


def test_elo_update_by_hand() -> None:
    a, b = np.array([0, 1]), np.array([1, 0])
    # Battle 1: m0 beats m1 from 1000/1000: expected 0.5, K = 4 -> ±2. Battle 2: m1 (998) beats m0 (1002).
    out = elo_ratings(a, b, np.array([1.0, 1.0]), 2, np.array([[0, 1]]), k=4, scale=400, base=10, initial=1000)
    e_m1 = 1 / (1 + 10 ** ((1002 - 998) / 400))
    assert out[0] == pytest.approx([1002 - 4 * (1 - e_m1), 998 + 4 * (1 - e_m1)])
    # Zero-sum updates keep the mean at the starting value; order matters, so permutations are averaged.
    battles, _ = bt_battles([0.0, 1.0, -1.0], n=300, seed=4)
    r = rate(battles, RatingsConfig(bootstrap=0, elo_permutations=0))
    assert r.elo.mean() == pytest.approx(1000.0)
    shuffled = rate(battles, RatingsConfig(bootstrap=0, elo_permutations=30, seed=1))
    again = rate(battles, RatingsConfig(bootstrap=0, elo_permutations=30, seed=1))
    assert np.array_equal(shuffled.elo, again.elo) and not np.allclose(shuffled.elo, r.elo)


def test_bootstrap_is_seeded() -> None:
    battles, _ = bt_battles([0.0, 0.7, -0.5], n=500, seed=8)
    config = RatingsConfig(bootstrap=100, elo_permutations=5, seed=3)
    one, two = rate(battles, config), rate(battles, config)
    assert np.array_equal(one.bt_lower, two.bt_lower) and np.array_equal(one.elo_upper, two.elo_upper)
    other = rate(battles, RatingsConfig(bootstrap=100, elo_permutations=5, seed=4))
    assert not np.array_equal(one.bt_lower, other.bt_lower)
