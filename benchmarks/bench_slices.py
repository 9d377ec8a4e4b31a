"""Slice enumeration (`cg_ray.profile.slices`) vs the naive way, in one run.

Workload (synthetic, seeded): ROWS rows × FIELDS metadata fields of 2..12 values each, 0/1 scores. Ours
counts every conjunction of up to 2 conditions with one pandas group-by per field combination (F + F(F−1)/2
group-bys), then computes the intervals vectorised. The naive way walks the rows in Python and updates a
dict per conjunction. Both must find the same slices with the same counts; the naive way runs on a prefix
(`--naive-rows`) and ours is timed on that same prefix for the ratio, printed last. The full-size time is
the cost a user pays per run (`cg-ray metrics` / a service analysis).

    .venv/bin/python benchmarks/bench_slices.py [--rows 1000000] [--fields 10] [--naive-rows 50000]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from cg_ray.profile.slices import candidate_slices
from cg_ray.profile.strata import RowFrame


def make_frame(n: int, fields: int, seed: int = 0) -> RowFrame:
    rng = np.random.default_rng(seed)
    codes, values = {}, {}
    p = np.full(n, 0.7)
    for f in range(fields):
        k = 2 + f % 11
        c = rng.integers(0, k, n).astype(np.int32)
        codes[f"f{f}"], values[f"f{f}"] = c, [f"v{i}" for i in range(k)]
        p -= 0.05 * (c == 0)
    scores = (rng.random(n) < np.clip(p, 0.05, 1)).astype(np.float64)
    return RowFrame(np.arange(n), [str(i) for i in range(n)], scores, codes, values)


def naive(frame: RowFrame, min_rows: int) -> dict[tuple[tuple[str, int], ...], tuple[int, float]]:
    names = list(frame.codes)
    counts: dict[tuple[tuple[str, int], ...], list[float]] = {}
    columns = {n: frame.codes[n].tolist() for n in names}
    scores = frame.scores.tolist()
    for i, y in enumerate(scores):
        for order in (1, 2):
            for combo in itertools.combinations(names, order):
                key = tuple((f, columns[f][i]) for f in combo)
                entry = counts.setdefault(key, [0, 0.0])
                entry[0] += 1
                entry[1] += y
    return {k: (int(n), s) for k, (n, s) in counts.items() if n >= min_rows}


def main() -> None:
    from cg_ray.hardware import hardware_info

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--fields", type=int, default=10)
    ap.add_argument("--naive-rows", type=int, default=50_000)
    ap.add_argument("--min-rows", type=int, default=20)
    args = ap.parse_args()
    print(f"hardware: {hardware_info().line()}; pandas group-bys, float64 scores (no model)")
    full = make_frame(args.rows, args.fields)
    t0 = time.perf_counter()
    found = candidate_slices(full, max_order=2, min_rows=args.min_rows)
    full_s = time.perf_counter() - t0
    n_combos = args.fields + args.fields * (args.fields - 1) // 2
    print(
        f"ours, {args.rows:,} rows × {args.fields} fields ({n_combos} group-bys): {full_s:.2f} s, {len(found):,} slices"
    )

    prefix = make_frame(args.naive_rows, args.fields)
    t0 = time.perf_counter()
    mine = candidate_slices(prefix, max_order=2, min_rows=args.min_rows)
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = naive(prefix, args.min_rows)
    naive_s = time.perf_counter() - t0
    same = {s.conditions: (s.n_rows, s.mean_score * s.n_rows) for s in mine}
    agree = set(same) == set(theirs) and all(
        same[k][0] == theirs[k][0] and abs(same[k][1] - theirs[k][1]) < 1e-6 for k in same
    )
    print(
        f"naive loop on {args.naive_rows:,} rows: {naive_s:.2f} s; ours {ours_s:.3f} s; same slices and counts: {agree}"
    )
    if not agree:
        raise SystemExit("the vectorised slices differ from the naive count")
    print(f"speed-up (vectorised / naive loop, same {args.naive_rows:,} rows): {naive_s / ours_s:.1f}x")


if __name__ == "__main__":
    main()
