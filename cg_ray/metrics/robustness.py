"""Robustness of CG scores (paper §4.2.3): repeated random subsampling and adversarial ablation.

Both re-run the metrics on a subset of rows many times. Instead of re-aggregating the kept rows each
time, we aggregate only the removed rows and subtract them from the full sums (removing 20% costs a
quarter of re-adding 80%); activity is decided by exact integer row counts, so subtraction never leaves
a concept "active" through float rounding.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from cg_ray.config import MetricsConfig, RobustnessConfig
from cg_ray.metrics.accumulator import BenchmarkSums, CGAccumulator
from cg_ray.metrics.compute import CGResult, compute_metrics
from cg_ray.metrics.rankings import rank_concepts

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 5.0


@dataclass
class RowTable:
    """All rows in memory as CSR, benchmark codes into `benchmark_names` (needed to drop rows at will)."""

    d_sae: int
    benchmark_names: list[str]
    benchmark_codes: npt.NDArray[np.int32]
    scores: npt.NDArray[np.float64]
    offsets: npt.NDArray[np.int64]
    concept_ids: npt.NDArray[np.int32]
    concept_acts: npt.NDArray[np.float32]

    @property
    def n_rows(self) -> int:
        return len(self.scores)

    def accumulate(self, rows: npt.NDArray[np.int64] | None = None) -> CGAccumulator:
        """Sums over the given row indices (all rows when None)."""
        acc = CGAccumulator(self.d_sae)
        if rows is None:
            acc.add_batch(
                self.benchmark_codes,
                self.benchmark_names,
                self.scores,
                self.offsets,
                self.concept_ids,
                self.concept_acts,
            )
            return acc
        lengths = np.diff(self.offsets)[rows]
        starts = self.offsets[rows]
        # Gather the elements of the selected rows without a Python loop.
        elem = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())
        acc.add_batch(
            self.benchmark_codes[rows],
            self.benchmark_names,
            self.scores[rows],
            np.concatenate([[0], np.cumsum(lengths)]),
            self.concept_ids[elem],
            self.concept_acts[elem],
        )
        return acc


def subtract(full: CGAccumulator, removed: CGAccumulator) -> CGAccumulator:
    """full − removed, with exact zeros wherever no remaining row activates a concept."""
    out = CGAccumulator(full.d_sae)
    for name, sums in full.benchmarks.items():
        s = sums.copy()
        r = removed.benchmarks.get(name)
        if r is not None:
            s.n_rows -= r.n_rows
            s.n_scored_rows -= r.n_scored_rows
            s.score_sum -= r.score_sum
            for attr in BenchmarkSums._ARRAYS:
                getattr(s, attr).__isub__(getattr(r, attr))
            inactive = s.active_rows == 0
            s.act_sum[inactive] = 0.0
            unscored = s.scored_active_rows == 0
            s.scored_act_sum[unscored] = 0.0
            s.weighted_sum[unscored] = 0.0
            s.scored_act_sq_sum[unscored] = 0.0
            np.maximum(s.act_sum, 0.0, out=s.act_sum)
            np.maximum(s.scored_act_sum, 0.0, out=s.scored_act_sum)
            np.maximum(s.weighted_sum, 0.0, out=s.weighted_sum)
            np.maximum(s.scored_act_sq_sum, 0.0, out=s.scored_act_sq_sum)
        if s.n_rows > 0:
            out.benchmarks[name] = s
    return out


def _median_x_model(result: CGResult) -> float:
    x = result.X_model[~np.isnan(result.X_model)]
    return float(np.median(x)) if x.size else float("nan")


class SubsamplingReport(TypedDict):
    """robustness.json's `subsampling`: the spread of the scores over the repeats."""

    repeats: int
    drop_fraction: float
    seed: int
    X_model_std_mean: float | None
    X_model_std_median: float | None
    X_bench_std_mean: float | None
    X_bench_std_median: float | None
    n_concepts_scored: int
    n_concepts_present: int
    seconds: float


class AblationShift(TypedDict):
    """The shift of median X_model after removing the rows salient for one group of concepts."""

    n_concepts: int
    rows_removed: int
    median_shift: float
    median_shift_pct: float | None


class RandomControl(TypedDict):
    repeats: int
    median_shift_mean: float
    median_shift_std: float


class AblationReport(TypedDict):
    """robustness.json's `adversarial_ablation`."""

    baseline_median_X_model: float
    rows_removed: int
    remove_best: AblationShift
    remove_worst: AblationShift
    random_control: RandomControl


def subsampling(
    table: RowTable, full: CGAccumulator, metrics: MetricsConfig, cfg: RobustnessConfig
) -> tuple[SubsamplingReport, dict[str, npt.NDArray[np.float64]]]:
    """Re-run the metrics `repeats` times, each dropping `drop_fraction` of every benchmark's rows."""
    rng = np.random.default_rng(cfg.seed)
    base = compute_metrics(full, metrics)
    per_bench_rows = [np.flatnonzero(table.benchmark_codes == b) for b in range(len(table.benchmark_names))]
    x_model = np.empty((cfg.repeats, table.d_sae))
    x_bench = np.empty((cfg.repeats, table.d_sae))
    started = last_report = time.perf_counter()
    for r in range(cfg.repeats):
        dropped = np.concatenate(
            [rng.choice(rows, size=round(cfg.drop_fraction * rows.size), replace=False) for rows in per_bench_rows]
        )
        result = compute_metrics(subtract(full, table.accumulate(np.sort(dropped))), metrics)
        x_model[r], x_bench[r] = result.X_model, result.X_bench
        if (now := time.perf_counter()) - last_report > PROGRESS_EVERY_S:
            log.info("subsampling: %d/%d repeats (%.1f s)", r + 1, cfg.repeats, now - started)
            last_report = now

    defined = (~np.isnan(x_model)).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        model_std = np.where(defined >= 2, np.nanstd(np.where(defined >= 2, x_model, 0.0), axis=0), np.nan)
    bench_std = x_bench.std(axis=0)
    present = base.X_bench >= metrics.epsilon
    scored = ~np.isnan(model_std)
    report: SubsamplingReport = {
        "repeats": cfg.repeats,
        "drop_fraction": cfg.drop_fraction,
        "seed": cfg.seed,
        "X_model_std_mean": float(model_std[scored].mean()) if scored.any() else None,
        "X_model_std_median": float(np.median(model_std[scored])) if scored.any() else None,
        "X_bench_std_mean": float(bench_std[present].mean()) if present.any() else None,
        "X_bench_std_median": float(np.median(bench_std[present])) if present.any() else None,
        "n_concepts_scored": int(scored.sum()),
        "n_concepts_present": int(present.sum()),
        "seconds": round(time.perf_counter() - started, 3),
    }
    return report, {"X_model_std": model_std, "X_bench_std": bench_std}


def _row_saliency(table: RowTable, concepts: list[int]) -> npt.NDArray[np.float64]:
    """Σ over the given concepts of s̃_{c,i}, per row."""
    chosen = np.zeros(table.d_sae, dtype=bool)
    chosen[concepts] = True
    hit = chosen[table.concept_ids]
    row_of = np.repeat(np.arange(table.n_rows), np.diff(table.offsets))
    sums = np.bincount(row_of[hit], weights=table.concept_acts[hit].astype(np.float64), minlength=table.n_rows)
    return sums.astype(np.float64, copy=False)


def adversarial_ablation(
    table: RowTable, full: CGAccumulator, metrics: MetricsConfig, cfg: RobustnessConfig
) -> AblationReport:
    """Remove the rows most salient for the best / worst concepts; report the shift of median X_model.

    Removing rows where high-scoring concepts fire should lower the median, and the reverse for the worst
    concepts; removals of as many random rows (the control) show the shift chance alone produces.
    """
    base = compute_metrics(full, metrics)
    ranked = rank_concepts(base, top_k=cfg.ablation_concepts)
    base_median = _median_x_model(base)
    n_remove = min(cfg.ablation_rows, max(table.n_rows - 1, 0))

    def shift_after_removing(rows: npt.NDArray[np.int64]) -> float:
        result = compute_metrics(subtract(full, table.accumulate(np.sort(rows))), metrics)
        return _median_x_model(result) - base_median

    def removing_salient(concepts: list[int]) -> AblationShift:
        saliency = _row_saliency(table, concepts)
        salient = np.argsort(-saliency, kind="stable")[:n_remove]
        salient = salient[saliency[salient] > 0]
        shift = shift_after_removing(salient)
        return {
            "n_concepts": len(concepts),
            "rows_removed": int(salient.size),
            "median_shift": shift,
            "median_shift_pct": 100.0 * shift / base_median if base_median else None,
        }

    remove_best = removing_salient(ranked.best_model)
    remove_worst = removing_salient(ranked.worst_model)
    rng = np.random.default_rng(cfg.seed)
    control = np.array(
        [
            shift_after_removing(rng.choice(table.n_rows, size=n_remove, replace=False))
            for _ in range(cfg.ablation_control_repeats)
        ]
    )
    return {
        "baseline_median_X_model": base_median,
        "rows_removed": n_remove,
        "remove_best": remove_best,
        "remove_worst": remove_worst,
        "random_control": {
            "repeats": cfg.ablation_control_repeats,
            "median_shift_mean": float(control.mean()),
            "median_shift_std": float(control.std()),
        },
    }
