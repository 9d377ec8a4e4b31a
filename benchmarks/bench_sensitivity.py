"""Matching two readers' latents across layers (`cg_ray.sensitivity.pairs.correlation`) vs the naive way, in
one run.

Workload: the activations s̃ of two readers over the same rows (rows × latents, sparse by row as rows.parquet
holds them). By default two seeded random readers of 5,144 rows × 4,608 latents with about a fifth of the
latents active per row, as the real mean-pooled rows are; `--rows-a/--rows-b` take two real rows files of
the same rows (e.g. a run's rows.parquet and its sensitivity/readers/NAME/rows.parquet). Ours: the cross
products accumulated over dense row chunks (one BLAS product each), then means and deviations from the
sparse matrices. The naive way: both matrices dense, stacked, `np.corrcoef` (which also correlates each
reader with itself). Both must agree (max |Δ| printed); the ratio is printed last. Then the Hungarian match
(scipy's `linear_sum_assignment`), the same in both, timed once.

    .venv/bin/python benchmarks/bench_sensitivity.py [--rows 5144] [--latents 4608] [--density 0.2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import optimize, sparse


def random_reader(rows: int, latents: int, density: float, seed: int) -> sparse.csr_matrix:
    rng = np.random.default_rng(seed)
    m = sparse.random(rows, latents, density=density, format="csr", random_state=rng, dtype=np.float64)
    m.data = rng.exponential(1.0, m.data.size)
    return m


def naive(a: sparse.csr_matrix, b: sparse.csr_matrix) -> np.ndarray:
    both = np.hstack([a.toarray(), b.toarray()])
    with np.errstate(invalid="ignore", divide="ignore"):
        full = np.corrcoef(both, rowvar=False)
    return np.nan_to_num(full[: a.shape[1], a.shape[1] :])


def main() -> None:
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.hardware import hardware_info
    from cg_ray.sensitivity.pairs import activations, correlation

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5144)
    ap.add_argument("--latents", type=int, default=4608)
    ap.add_argument("--density", type=float, default=0.2)
    ap.add_argument("--rows-a")
    ap.add_argument("--rows-b")
    args = ap.parse_args()
    print(f"hardware: {hardware_info().line()}; float64 numpy / scipy (no model)")
    if args.rows_a and args.rows_b:
        a, b = activations(open_rows(args.rows_a), None), activations(open_rows(args.rows_b), None)
        print(f"workload: {args.rows_a} vs {args.rows_b}")
    else:
        a = random_reader(args.rows, args.latents, args.density, 1)
        b = random_reader(args.rows, args.latents, args.density, 2)
        print(f"workload: two random readers, {args.rows:,} rows x {args.latents:,} latents, density {args.density}")
    print(f"rows {a.shape[0]:,}; active per row: {a.nnz / a.shape[0]:.0f} (A), {b.nnz / b.shape[0]:.0f} (B)")
    started = time.perf_counter()
    ours = correlation(a, b)
    t_ours = time.perf_counter() - started
    started = time.perf_counter()
    theirs = naive(a, b)
    t_naive = time.perf_counter() - started
    print(f"ours: {t_ours:.2f} s; naive np.corrcoef of the stacked dense matrices: {t_naive:.2f} s")
    print(f"max |ours - naive|: {np.abs(ours - theirs).max():.2e}")
    started = time.perf_counter()
    rows, cols = optimize.linear_sum_assignment(ours, maximize=True)
    print(
        f"Hungarian match of {ours.shape[0]:,} x {ours.shape[1]:,}: {time.perf_counter() - started:.2f} s; "
        f"share matched at >= 0.5: {(ours[rows, cols] >= 0.5).mean():.3f}"
    )
    print(f"speed-up over the naive way: {t_naive / t_ours:.2f}x")


if __name__ == "__main__":
    main()
