"""Speed of `cg-ray estimate`'s row choice: incremental Cholesky vs a from-scratch solve per step, one run.

Workload (synthetic, seeded; or a real per-row score table with --scores): MODELS models × ROWS rows of
binary 2PL scores with two abilities (AlpacaEval 2.0's size by default: 58 × 805); the first model is held
out, the row prior (PPCA, 10 dimensions + the level prior) is fitted on the others, and rows are chosen
greedily up to the largest budget (25% = 201 rows).

- ours: `cg_ray.skills.estimate.active_order`: keeps v = Σ_post w and diag(Σ_post) and updates them with one
  new Cholesky column per chosen row (O(n·t) per step);
- naive: at every step, the posterior from scratch given the rows chosen so far: solve Σ_oo against
  [Σ_o· w | Σ_o·] (np.linalg.solve), v = Σw − Σ_·o Σ_oo⁻¹ Σ_o· w, diag = diag Σ − rowwise Σ_·o Σ_oo⁻¹ Σ_o·
  (O(n·t² + t³) per step), then the same gain (v_i² / diag_i) and argmax.

Both must choose the same rows in the same order, and the estimates at each budget (the posterior mean
and SE through `posterior_estimate`) must agree; the speed ratio is printed last.

    .venv/bin/python benchmarks/bench_skills.py [--models 58] [--rows 805] [--budgets 0.1,0.25] [--scores FILE]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from cg_ray.skills.estimate import RowPrior, active_order, fit_prior, posterior_estimate, tie_safe


def synthetic(models: int, rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((models, 2)) * [1.2, 0.6]
    tasks = rng.integers(0, 5, rows)
    a = rng.uniform(0.6, 2.0, (rows, 1)) * np.stack([np.ones(rows), np.where(tasks % 2 == 0, 1.0, -1.0)], axis=1)
    p = 1.0 / (1.0 + np.exp(-(theta @ a.T - rng.normal(0.0, 1.0, rows))))
    return (rng.random(p.shape) < p).astype(float), tasks.astype(str)


def real(path: Path) -> tuple[np.ndarray, np.ndarray]:
    from cg_ray.skills.matrix import read_long, rows_matrix

    data = rows_matrix(read_long(path), str(path))
    return data.scores, data.tasks


def naive_order(prior: RowPrior, available: np.ndarray, n_pick: int, jitter: float = 1e-9) -> np.ndarray:
    """The same greedy rule, the posterior recomputed from scratch at every step."""
    idx = np.flatnonzero(available)
    cov = prior.cov[np.ix_(idx, idx)]
    w = np.full(idx.size, 1.0 / idx.size)
    prior_v, prior_diag = cov @ w, np.diag(cov)
    chosen: list[int] = []
    for _ in range(min(n_pick, idx.size)):
        if chosen:
            s_o = cov[chosen]  # t × n
            solved = np.linalg.solve(cov[np.ix_(chosen, chosen)], np.column_stack([s_o @ w, s_o]))
            v = prior_v - s_o.T @ solved[:, 0]
            diag = prior_diag - np.einsum("tn,tn->n", s_o, solved[:, 1:])
        else:
            v, diag = prior_v, prior_diag
        gain = tie_safe(v**2 / np.maximum(diag, jitter))  # ties to the lowest index, as in active_order
        gain[chosen] = -np.inf
        chosen.append(int(np.argmax(gain)))
    return np.asarray(idx[np.asarray(chosen, dtype=int)])


def dense_posterior(prior: RowPrior, available: np.ndarray, obs: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """The overall estimate and SE the textbook way: the full covariance, Σ_oo solved densely."""
    cov = prior.cov
    idx = np.flatnonzero(available)
    unobs = np.setdiff1d(idx, obs)
    s_oo = cov[np.ix_(obs, obs)] + 1e-6 * np.eye(obs.size)
    s_uo = cov[np.ix_(unobs, obs)]
    fill = np.zeros(prior.mean.size)
    fill[obs] = values
    fill[unobs] = np.clip(
        prior.mean[unobs] + s_uo @ np.linalg.solve(s_oo, values - prior.mean[obs]), prior.low, prior.high
    )
    w_u = np.full(unobs.size, 1.0 / idx.size)
    b = s_uo.T @ w_u
    var = w_u @ cov[np.ix_(unobs, unobs)] @ w_u - b @ np.linalg.solve(s_oo, b)
    return float(fill[idx].mean()), float(np.sqrt(max(var, 0.0)))


def time_posteriors(
    prior: RowPrior, available: np.ndarray, obs: np.ndarray, y: np.ndarray, tasks: np.ndarray, repeats: int
) -> None:
    """The posterior (low-rank factor + Woodbury) against the dense way, same rows, same result."""
    best = {"ours": float("inf"), "dense": float("inf")}
    for _ in range(repeats):
        t0 = time.perf_counter()
        ours = posterior_estimate(prior, available, obs, y[obs], tasks)
        t1 = time.perf_counter()
        dense = dense_posterior(prior, available, obs, y[obs])
        t2 = time.perf_counter()
        best = {"ours": min(best["ours"], t1 - t0), "dense": min(best["dense"], t2 - t1)}
    gap = max(abs(ours.overall - dense[0]), abs(ours.overall_se - dense[1]))
    assert gap < 1e-8, f"the posteriors differ by {gap}"
    print(
        f"posterior from {obs.size} rows: dense covariance + solve {best['dense']:.4f} s, low-rank factor + "
        f"Woodbury {best['ours']:.4f} s ({best['dense'] / best['ours']:.1f}x; equal within {gap:.1e})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=58)
    ap.add_argument("--rows", type=int, default=805)
    ap.add_argument("--budgets", default="0.1,0.25", help="fractions of the rows; rows chosen up to the largest")
    ap.add_argument("--components", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats of each (the best is kept)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scores", type=Path, default=None, help="per-row scores (model,row_id,score) instead")
    args = ap.parse_args()
    from cg_ray.hardware import hardware_info

    print(f"hardware: {hardware_info().line()}; float64 numpy (no model)")
    scores, tasks = real(args.scores) if args.scores else synthetic(args.models, args.rows, args.seed)
    budgets = sorted(float(b) for b in args.budgets.split(","))
    y, available = scores[0], ~np.isnan(scores[0])
    prior = fit_prior(scores[1:], args.components, args.seed)
    sizes = [max(1, round(b * int(available.sum()))) for b in budgets]
    what = str(args.scores) if args.scores else "synthetic 2PL"
    print(f"{what}: {scores.shape[0]} models × {scores.shape[1]} rows, {max(sizes)} rows chosen (budgets {budgets})")
    timings: dict[str, float] = {}
    orders: dict[str, np.ndarray] = {}
    for name, fn in (("ours", active_order), ("naive", naive_order)):
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            orders[name] = fn(prior, available, max(sizes))
            best = min(best, time.perf_counter() - t0)
        timings[name] = best
    same = int(np.argmin(orders["ours"] == orders["naive"])) if (orders["ours"] != orders["naive"]).any() else None
    assert same is None, f"the two orders differ from step {same}"
    worst = 0.0
    for n in sizes:
        a = posterior_estimate(prior, available, orders["ours"][:n], y[orders["ours"][:n]], tasks)
        b = posterior_estimate(prior, available, orders["naive"][:n], y[orders["naive"][:n]], tasks)
        worst = max(worst, abs(a.overall - b.overall), abs(a.overall_se - b.overall_se))
        print(f"  {n:4d} rows: estimate {a.overall:.4f} ± {a.overall_se:.4f} (exhaustive {np.nanmean(y):.4f})")
    assert worst < 1e-9, f"estimates differ by {worst}"
    time_posteriors(prior, available, orders["ours"][: max(sizes)], y, tasks, args.repeats)
    per = 1000 / max(sizes)
    print(f"naive (solve per step)    : {timings['naive']:8.3f} s ({per * timings['naive']:.2f} ms per row)")
    print(f"ours (incremental Cholesky): {timings['ours']:8.3f} s ({per * timings['ours']:.2f} ms per row), ", end="")
    print(f"same {max(sizes)} rows in the same order, estimates equal within {worst:.1e}")
    print(f"speed-up (incremental / naive, same {max(sizes)} rows): {timings['naive'] / timings['ours']:.1f}x")


if __name__ == "__main__":
    main()
