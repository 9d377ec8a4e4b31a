"""Aggregation speed of `cg-ray metrics` vs a naive dense NumPy implementation, in one run.

Workload (synthetic, seeded): ROWS rows × d_sae 65,536 with ~64 non-zeros per row, in 4 benchmarks.
Ours streams rows.parquet in batches into per-benchmark sums (scatter-add) and computes every metric;
it runs in a fresh subprocess so its peak RSS is its own. The naive way materialises the dense
rows × d_sae matrix and reduces it per benchmark; it runs on the largest prefix that fits NAIVE_GB, and
ours is timed on that same prefix for the ratio, printed last.

    .venv/bin/python benchmarks/bench_metrics.py [--rows 1000000] [--naive-gb 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from cg_ray.synthetic import SyntheticSpec, write_synthetic_rows

D_SAE = 65_536
NNZ = 66  # draws per row; ~64 unique after de-duplication

CHILD = r"""
import json, resource, sys, time
from cg_ray.artifacts.rows import accumulate_rows, open_rows
from cg_ray.metrics.compute import compute_metrics
t0 = time.perf_counter()
acc = accumulate_rows(open_rows(sys.argv[1]))
t1 = time.perf_counter()
result = compute_metrics(acc)
t2 = time.perf_counter()
print(json.dumps({"rows": acc.n_rows, "aggregate_s": t1 - t0, "metrics_s": t2 - t1,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "median_X_model": float(__import__("numpy").nanmedian(result.X_model))}))
"""


def ours(path: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def naive(path: Path, n_rows: int) -> tuple[float, np.ndarray]:
    """Dense: S[rows, d_sae] filled row by row, then χ sums per benchmark by dense reductions."""
    t0 = time.perf_counter()
    table = pq.read_table(path).slice(0, n_rows)
    dense = np.zeros((n_rows, D_SAE), dtype=np.float32)
    for i, (ids, acts) in enumerate(
        zip(table["concept_ids"].to_pylist(), table["concept_acts"].to_pylist(), strict=True)
    ):
        dense[i, ids] = acts
    bench = np.asarray(table["benchmark"].to_pylist())
    scores = table["score"].to_numpy()
    chi_model = []
    for name in np.unique(bench):
        sel = np.flatnonzero(bench == name)
        s = dense[sel]
        act = s.sum(axis=0, dtype=np.float64)
        # float32 matvec: a float64 score vector would make NumPy upcast the whole block (20× slower).
        weighted = (scores[sel].astype(np.float32) @ s).astype(np.float64)
        (s > 0).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            chi_model.append(np.where(act > 0, weighted / act, np.nan))
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # concepts no row activates: NaN by design
        x_model = np.nanmean(np.stack(chi_model), axis=0)
    return time.perf_counter() - t0, x_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--naive-gb", type=float, default=4.0, help="memory the dense matrix may take")
    args = ap.parse_args()
    from cg_ray.hardware import hardware_info

    print(f"hardware: {hardware_info().line()}; sums in float64, s̃ stored as float32 (no model)")
    naive_rows = min(args.rows, int(args.naive_gb * 2**30 / (D_SAE * 4)))

    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "rows.parquet"
        t0 = time.perf_counter()
        benchmarks = ("b0", "b1", "b2", "b3")
        write_synthetic_rows(
            big, SyntheticSpec(benchmarks=benchmarks, rows_per_benchmark=args.rows // 4, d_sae=D_SAE, nnz=NNZ)
        )
        meta = pq.ParquetFile(big).metadata
        size_mib = big.stat().st_size / 2**20
        print(f"generated {meta.num_rows:,} rows in {time.perf_counter() - t0:.1f} s ({size_mib:.0f} MiB)")

        full = ours(big)
        rate = full["rows"] / (full["aggregate_s"] + full["metrics_s"])
        print(
            f"ours, {full['rows']:,} rows: aggregate {full['aggregate_s']:.2f} s + metrics {full['metrics_s']:.2f} s "
            f"= {rate:,.0f} rows/s, peak RSS {full['peak_rss_mb']:.0f} MB"
        )

        # Same prefix for both, so the ratio compares like with like (rows interleave no benchmarks:
        # the synthetic writer emits benchmark by benchmark, so the prefix is one benchmark's rows).
        small = Path(tmp) / "small.parquet"
        pq.write_table(
            pq.read_table(big).slice(0, naive_rows).replace_schema_metadata(pq.read_schema(big).metadata), small
        )
        mine = ours(small)
        mine_s = mine["aggregate_s"] + mine["metrics_s"]
        naive_s, naive_x = naive(small, naive_rows)
        assert abs(np.nanmedian(naive_x) - mine["median_X_model"]) < 1e-4, "naive and ours disagree"
        print(f"naive dense, {naive_rows:,} rows: {naive_s:.2f} s = {naive_rows / naive_s:,.0f} rows/s")
        print(f"ours,        {naive_rows:,} rows: {mine_s:.2f} s = {naive_rows / mine_s:,.0f} rows/s")
        print(f"speedup over naive dense: {naive_s / mine_s:.1f}x")


if __name__ == "__main__":
    main()
