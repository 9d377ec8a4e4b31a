"""The repeated grouped splits' choosing sums (`cg_ray.profile.splits`) vs the naive way, in one run.

Workload (synthetic, seeded, as benchmarks/bench_metrics.py): ROWS rows of 4 benchmarks, d_sae 65,536, 66
active concepts a row, with 10 flat metadata fields of 2..50 values whose first value lowers the score a
little. Each of the R splits chooses its findings on half of the 20 parts of grouped rows, so each split needs
the concepts' residual sums (against its own cell means) and the slices' counts over its own choosing rows.

- ours: one pass over the activations with the part accumulator (`ResidualPass.observe` over the batches,
  as the pipeline does: Σ s̃, Σ s̃², Σ s̃ m per (part, concept) and Σ s̃ eₛ per split), and one group-by per
  field combination with the part as one more key (`slice_counts`); a split's choosing sums are the sums over
  its parts (`ResidualAccumulator.finish_split`, `training_slices`);
- naive: per split, a pass over the activations accumulating that split's choosing rows (a fresh
  `ResidualAccumulator`, scores NaN outside the choosing half, the split's cell means) and a slice
  enumeration on the choosing rows (`candidate_slices`, de-duplicated as `training_slices` does).

Both must give the same choosing-half residuals (to 1e-9) and the same slices for every split (asserted).
Also printed: the whole `judge_rows` (the metrics pass, the splits' tests, the modes, the terms) at this
size; the ratio is printed last.

    .venv/bin/python benchmarks/bench_splits.py [--rows 200000] [--splits 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.rows import iter_row_batches, open_rows
from cg_ray.config import MetricsConfig
from cg_ray.hardware import hardware_info
from cg_ray.profile.findings import ResidualPass
from cg_ray.profile.judgement import judge_rows
from cg_ray.profile.residual import ResidualAccumulator, Residuals
from cg_ray.profile.slices import (
    CANDIDATE_FACTOR,
    DUPLICATE_JACCARD,
    Slice,
    candidate_slices,
    near_duplicate,
    slice_counts,
    training_slices,
)
from cg_ray.synthetic import SyntheticSpec, iter_synthetic_batches

D_SAE = 65_536
FIELDS = 10
VALUES = [round(2 + f * 48 / (FIELDS - 1)) for f in range(FIELDS)]


def write_rows(path: Path, rows: int) -> None:
    spec = SyntheticSpec(benchmarks=("b0", "b1", "b2", "b3"), rows_per_benchmark=rows // 4, d_sae=D_SAE, nnz=66)
    schema = S.rows_schema_with_d_sae(D_SAE).append(S.METADATA_FIELD)
    rng = np.random.default_rng(12345)
    with pq.ParquetWriter(path, schema) as writer:
        for batch in iter_synthetic_batches(spec):
            n = batch.num_rows
            codes = np.stack([rng.integers(0, k, n) for k in VALUES], axis=1)
            scores = batch.column(S.SCORE).to_numpy(zero_copy_only=False).copy()
            scores[((rng.random((n, FIELDS)) < 0.05) & (codes == 0)).any(axis=1)] = 0.0
            meta = ["{" + ", ".join(f'"f{f}": "v{c[f]}"' for f in range(FIELDS)) + "}" for c in codes.tolist()]
            cols = [batch.column(i) for i in range(batch.num_columns)]
            cols[batch.schema.get_field_index(S.SCORE)] = pa.array(scores, pa.float64())
            writer.write_batch(pa.RecordBatch.from_arrays([*cols, pa.array(meta, pa.string())], schema=schema))


def choosing_parts(rp: ResidualPass) -> list[npt.NDArray[np.bool_]]:
    """Each split's choosing parts (the plan keeps its choosing rows)."""
    out = []
    for split in rp.plan.splits:
        keep = np.zeros(rp.plan.n_parts, bool)
        keep[np.unique(rp.plan.part[split.choosing])] = True
        assert np.array_equal(keep[rp.plan.part], split.choosing), split.index
        out.append(keep)
    return out


def ours(
    path: Path, cfg: MetricsConfig, rp: ResidualPass, min_rows: int
) -> tuple[float, list[Residuals], list[list[Slice]]]:
    """One pass with the part accumulator, one group-by per combination; each split sums its parts."""
    rows = open_rows(path)
    plan, keeps = rp.plan, choosing_parts(rp)
    t = time.perf_counter()
    for batch in iter_row_batches(rows):
        rp.observe(batch)
    counts = slice_counts(rp.frame, plan.part, plan.n_parts, cfg.slice_order)
    chosen = [training_slices(rp.frame, counts, keep, cfg.top_k, min_rows) for keep in keeps]
    residuals = [rp.acc.finish_split(s, keep) for s, keep in enumerate(keeps)]
    return time.perf_counter() - t, residuals, chosen


def naive(
    path: Path, cfg: MetricsConfig, rp: ResidualPass, min_rows: int
) -> tuple[float, list[Residuals], list[list[Slice]]]:
    """The same selections one split at a time: R passes over the activations and R slice enumerations."""
    rows = open_rows(path)
    frame = rp.frame
    t = time.perf_counter()
    residuals, chosen = [], []
    for split in rp.plan.splits:
        acc = ResidualAccumulator(rows.d_sae)
        seen = 0
        for batch in iter_row_batches(rows):
            here = slice(seen, seen + len(batch))
            scores = np.where(split.choosing[here], frame.scores[here], np.nan)
            acc.add(batch.offsets, batch.concept_ids, batch.concept_acts, scores, split.expected_at(here))
            seen += len(batch)
        residuals.append(acc.finish())
        sub = frame.subset(np.flatnonzero(split.choosing))
        kept: list[Slice] = []
        masks: list[npt.NDArray[np.bool_]] = []
        # De-duplicated as the run does: on the slices' scored rows over the whole suite.
        for s in candidate_slices(sub, cfg.slice_order, min_rows)[: CANDIDATE_FACTOR * cfg.top_k]:
            m = s.mask(frame)
            if not near_duplicate(m, masks, DUPLICATE_JACCARD):
                kept.append(s)
                masks.append(m)
                if len(kept) == cfg.top_k:
                    break
        chosen.append(kept)
    return time.perf_counter() - t, residuals, chosen


def check(
    ours_res: list[Residuals], naive_res: list[Residuals], ours_sl: list[list[Slice]], naive_sl: list[list[Slice]]
) -> None:
    for s, (a, b) in enumerate(zip(ours_res, naive_res, strict=True)):
        assert np.array_equal(np.isnan(a.residual), np.isnan(b.residual)), s
        assert np.allclose(np.nan_to_num(a.residual), np.nan_to_num(b.residual), rtol=0, atol=1e-9), s
        assert np.allclose(np.nan_to_num(a.n_eff), np.nan_to_num(b.n_eff), rtol=1e-9, atol=1e-9), s
    for s, (mine, theirs) in enumerate(zip(ours_sl, naive_sl, strict=True)):
        # The same ranks (upper end ascending, then more rows) and the same slices at each rank; slices tied on
        # both may come in either order (each way enumerates them in its own order), and the last tie may be
        # cut by top_k at a different member.
        assert [_key(x) for x in mine] == [_key(y) for y in theirs], s
        for key in dict.fromkeys(_key(x) for x in mine):
            a = {x.conditions for x in mine if _key(x) == key}
            b = {y.conditions for y in theirs if _key(y) == key}
            assert a == b or key == _key(mine[-1]), (s, key, a, b)
        assert all(abs(x.low - y.low) < 1e-12 for x, y in zip(mine, theirs, strict=True)), s


def _key(s: Slice) -> tuple[float, int]:
    return round(s.high, 12), -s.n_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--rows-file", type=Path, help="an existing file written by write_rows (skip the writing)")
    args = ap.parse_args()
    cfg = MetricsConfig(splits=args.splits, top_k=50)
    min_rows = max(1, int(np.ceil(cfg.slice_min_rows / 2)))  # a half's slices, as splits.plan_splits
    print(f"hardware: {hardware_info().line()}; numpy + pandas, no model")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.rows_file or Path(tmp) / "rows.parquet"
        if args.rows_file is None:
            t = time.perf_counter()
            write_rows(path, args.rows)
            print(f"{args.rows:,} rows x {FIELDS} fields, d_sae {D_SAE:,}: written in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        rp = ResidualPass(open_rows(path), None, cfg)  # the frame, groups, parts, splits and their cell means
        print(
            f"set-up (metadata frame, groups and parts, {len(rp.plan.splits)} splits with their cell means; both ways "
            f"need it): {time.perf_counter() - t:.2f} s; {rp.plan.n_parts} parts, groups: {rp.plan.rule}"
        )
        t_ours, ours_res, ours_sl = ours(path, cfg, rp, min_rows)
        t_naive, naive_res, naive_sl = naive(path, cfg, rp, min_rows)
        check(ours_res, naive_res, ours_sl, naive_sl)
        print(f"same choosing-half residuals (1e-9) and the same {sum(map(len, ours_sl))} slices over the splits")
        t = time.perf_counter()
        beyond = judge_rows(open_rows(path), cfg)
        t_all = time.perf_counter() - t
        confirmed = beyond.summary()["judgement"]["confirmed"]
        print(f"whole judgement (judge_rows: the metrics pass, the splits' tests, modes, terms): {t_all:.1f} s")
        print(f"confirmed: {confirmed}")
        print(
            f"selection for {len(rp.plan.splits)} splits: ours (a pass + a part group-by) {t_ours:.2f} s, "
            f"naive (a pass + slices per split) {t_naive:.2f} s"
        )
        print(f"ratio naive/ours: {t_naive / t_ours:.2f}x")


if __name__ == "__main__":
    main()
