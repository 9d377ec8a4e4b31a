"""Speed of the paired bootstrap of `cg-ray diff`: vectorised vs a naive per-resample Python loop, one run.

Workload (synthetic, seeded; or two real run directories with --runs A B): ROWS paired rows in BENCHMARKS
benchmarks, d_sae 4,608 with NNZ non-zeros per row (the default reader's TopK SAE, k = 32), graded scores
that differ between the two runs, and the activations of B a perturbed copy of A's.

- ours: `cg_ray.compare.bootstrap.paired_bootstrap`: per benchmark and run, one dense (R+1 × n_b) by
  sparse (n_b × concepts) product for all resamples at once, then vectorised quantiles;
- naive: for each resample, gather the drawn rows (np.repeat of the counts), accumulate both runs with
  the project's CGAccumulator (`RowTable.accumulate`), compute χ_model / X_model with the same formulas
  (`chi_model`, `nanmean_rows`), keep the difference; np.nanquantile at the end.

Both use the same multinomial counts, so their intervals must agree (checked to 1e-5, float32 s̃ on the
naive path). Both run the same R resamples; the speed ratio is printed last.

    .venv/bin/python benchmarks/bench_diff.py [--rows 4000] [--resamples 200] [--runs RUN_A RUN_B]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy import sparse

from cg_ray.compare.bootstrap import PairedSample, _Weights, paired_bootstrap
from cg_ray.metrics.compute import chi_model, nanmean_rows
from cg_ray.metrics.robustness import RowTable

D_SAE = 4608
NNZ = 32


def synthetic(rows: int, n_bench: int, seed: int = 0) -> PairedSample:
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(D_SAE, size=(rows, NNZ), replace=True), axis=1)
    acts = rng.gamma(2.0, 0.5, size=(rows, NNZ))
    a = sparse.csr_matrix((acts.ravel(), (np.repeat(np.arange(rows), NNZ), ids.ravel())), shape=(rows, D_SAE))
    b = a.copy()
    b.data = b.data * rng.uniform(0.8, 1.2, b.data.size)  # B read its own responses: similar, not equal
    concepts = np.unique(a.indices)
    return PairedSample(
        acts_a=a[:, concepts].tocsr(),
        acts_b=b[:, concepts].tocsr(),
        scores_a=(rng.random(rows) < 0.4).astype(float),
        scores_b=(rng.random(rows) < 0.55).astype(float),
        codes=rng.integers(0, n_bench, rows),
        n_benchmarks=n_bench,
    )


def real(run_a: Path, run_b: Path) -> PairedSample:
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.compare.diff import paired_sample
    from cg_ray.compare.runs import open_diff_run, pair_rows

    a, b = open_diff_run(RunDir(run_a), "A"), open_diff_run(RunDir(run_b), "B")
    return paired_sample(a, b, pair_rows(a, b))[0]


def _x_model(acts: sparse.csr_matrix, scores: np.ndarray, codes: np.ndarray, n_bench: int, counts: np.ndarray):
    rows = np.repeat(np.arange(acts.shape[0]), counts.astype(np.int64))
    table = RowTable(
        d_sae=acts.shape[1],
        benchmark_names=[f"b{i}" for i in range(n_bench)],
        benchmark_codes=codes.astype(np.int32),
        scores=scores,
        offsets=acts.indptr.astype(np.int64),
        concept_ids=acts.indices.astype(np.int32),
        concept_acts=acts.data.astype(np.float32),
    )
    _, sums = table.accumulate(rows).stacked()
    return nanmean_rows(chi_model(sums["weighted_sum"], sums["scored_act_sum"]))


def naive(sample: PairedSample, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-resample loop over the same counts as ours; returns the 2.5% and 97.5% quantiles of ΔX_model."""
    weights = _Weights(sample, resamples, seed, max_cells=10**12)
    deltas = []
    for r in range(1, resamples + 1):
        counts = np.zeros(sample.codes.size)
        for b, rows in enumerate(weights.rows):
            counts[rows] = weights[b][r]
        x_a = _x_model(sample.acts_a, sample.scores_a, sample.codes, sample.n_benchmarks, counts)
        x_b = _x_model(sample.acts_b, sample.scores_b, sample.codes, sample.n_benchmarks, counts)
        deltas.append(x_b - x_a)
    low, high = np.nanquantile(np.array(deltas), [0.025, 0.975], axis=0)
    return low, high


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4000, help="paired rows (synthetic)")
    ap.add_argument("--benchmarks", type=int, default=4)
    ap.add_argument("--resamples", type=int, default=200, help="resamples, the same for both")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", nargs=2, type=Path, default=None, help="two run directories instead of synthetic")
    args = ap.parse_args()
    from cg_ray.hardware import hardware_info

    print(f"hardware: {hardware_info().line()}; float64 sums, s̃ float32 on the naive path (no model)")
    sample = real(*args.runs) if args.runs else synthetic(args.rows, args.benchmarks, args.seed)
    what = f"runs {args.runs[0]} vs {args.runs[1]}" if args.runs else "synthetic"
    print(
        f"{what}: {sample.codes.size:,} paired rows, {sample.n_benchmarks} benchmarks, "
        f"{sample.n_concepts:,} concepts active, {args.resamples} resamples"
    )
    t0 = time.perf_counter()
    ours = paired_bootstrap(sample, resamples=args.resamples, seed=args.seed)
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    low, high = naive(sample, args.resamples, args.seed)
    naive_s = time.perf_counter() - t0
    err = max(float(np.nanmax(np.abs(ours.x_low - low))), float(np.nanmax(np.abs(ours.x_high - high))))
    assert err < 1e-5, f"naive and ours disagree by {err}"
    print(f"naive loop : {naive_s:8.2f} s ({1000 * naive_s / args.resamples:.1f} ms per resample)")
    print(f"vectorised : {ours_s:8.2f} s ({1000 * ours_s / args.resamples:.1f} ms per resample), ", end="")
    print(f"intervals equal to naive within {err:.1e}")
    print(f"speed-up (vectorised / naive loop, same {args.resamples} resamples): {naive_s / ours_s:.1f}x")


if __name__ == "__main__":
    main()
