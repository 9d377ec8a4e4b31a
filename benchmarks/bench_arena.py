"""Bradley–Terry speed of `cg_ray.arena.ratings` vs the naive per-battle fit, in one run.

Workload (seeded): BATTLES battles among MODELS models drawn from known BT strengths, ties 5%.
Ours aggregates the battles once into the (m × m) win matrix and runs Newton's method on it; its bootstrap
resamples the (pair, outcome) cells as a multinomial. The naive way (as in the usual notebooks) fits a
logistic regression over every battle with L-BFGS and, for the bootstrap, resamples battle indices and
refits. Both give the same MLE (checked). The speed-up of one BT bootstrap round is printed last.

    .venv/bin/python benchmarks/bench_arena.py [--battles 100000] [--models 30] [--rounds 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize

from cg_ray.arena.config import RatingsConfig, TiePolicy
from cg_ray.arena.outcomes import BattleArrays, rating_scores
from cg_ray.arena.ratings import bootstrap_bradley_terry, fit_bradley_terry, pair_wins, rate


def draw(n: int, m: int, seed: int) -> tuple[BattleArrays, np.ndarray]:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, m)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    winner = np.where(rng.random(n) < 1 / (1 + np.exp(-(theta[a] - theta[b]))), 0, 1)
    winner[rng.random(n) < 0.05] = 2
    return BattleArrays([f"m{i}" for i in range(m)], a, b, winner), theta


def naive_fit(a: np.ndarray, b: np.ndarray, s: np.ndarray, m: int) -> np.ndarray:
    """Per-battle logistic log-likelihood, L-BFGS with its analytic gradient; O(battles) per evaluation."""

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        d = theta[a] - theta[b]
        value = -(s * -np.logaddexp(0, -d) + (1 - s) * -np.logaddexp(0, d)).sum()
        r = s - 1 / (1 + np.exp(-d))
        grad = -(np.bincount(a, r, minlength=m) - np.bincount(b, r, minlength=m))
        return float(value), grad

    theta = minimize(loss, np.zeros(m), jac=True, method="L-BFGS-B", options={"gtol": 1e-9, "maxiter": 2000}).x
    return theta - theta.mean()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--battles", type=int, default=100_000)
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=20, help="bootstrap rounds timed for each way")
    args = parser.parse_args()
    from cg_ray.hardware import hardware_info

    print(f"hardware: {hardware_info().line()}; float64 NumPy (no model, no dtype choice)")
    battles, _ = draw(args.battles, args.models, seed=0)
    m = args.models
    s_all = rating_scores(TiePolicy())[battles.winner]
    a, b, s = battles.model_a, battles.model_b, s_all

    t0 = time.perf_counter()
    ours = fit_bradley_terry(pair_wins(a, b, s, m))
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive = naive_fit(a, b, s, m)
    t_naive = time.perf_counter() - t0
    print(f"{args.battles:,} battles, {m} models: one BT fit ours {t_ours * 1e3:.1f} ms, naive {t_naive * 1e3:.1f} ms")
    print(f"max |θ_ours − θ_naive| = {np.abs(ours - naive).max():.2e} (same MLE)")

    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    for _ in range(args.rounds):
        idx = rng.integers(0, a.size, a.size)
        naive_fit(a[idx], b[idx], s[idx], m)
    naive_round = (time.perf_counter() - t0) / args.rounds
    t0 = time.perf_counter()
    bootstrap_bradley_terry(a, b, s, m, args.rounds, np.random.default_rng(1))
    ours_round = (time.perf_counter() - t0) / args.rounds
    t0 = time.perf_counter()
    rate(battles, RatingsConfig())
    print(
        f"rate() with the defaults (1,000 bootstrap rounds of BT and Elo, Elo over 100 shuffles): "
        f"{time.perf_counter() - t0:.1f} s"
    )
    print(f"BT bootstrap round ours {ours_round * 1e3:.2f} ms, naive {naive_round * 1e3:.1f} ms")
    print(f"speed-up per bootstrap round: {naive_round / ours_round:.1f}x")


if __name__ == "__main__":
    main()
