"""The CG formulas (docs/method.md) on stacked per-benchmark sums. Pure numpy.

Undefined values (χ_model of an inactive pair, X_model of a concept no scored row activates) are NaN
here; writers turn them into nulls, never 0 or NaN in outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cg_ray.config import MetricsConfig
from cg_ray.metrics.accumulator import CGAccumulator
from cg_ray.metrics.uncertainty import Uncertainty, compute_uncertainty
from cg_ray.schemas import COVERAGE_CLASSES

FloatArray = npt.NDArray[np.float64]

MISSING, UNDER, NORMAL, OVER = range(4)  # codes into COVERAGE_CLASSES


@dataclass(frozen=True)
class ClassThresholds:
    low: float | None  # value at the low percentile of non-missing concepts (None: nothing non-missing)
    high: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"low": self.low, "high": self.high}


@dataclass(frozen=True)
class CGResult:
    """Every per-concept and per-(benchmark, concept) quantity of one CG run."""

    config: MetricsConfig
    d_sae: int
    benchmarks: list[str]
    n_rows: npt.NDArray[np.int64]  # per benchmark
    n_scored_rows: npt.NDArray[np.int64]
    mean_score: FloatArray  # per benchmark (NaN: no scored row)
    act_sum: FloatArray  # B × d
    active_rows: npt.NDArray[np.int64]  # B × d
    chi_bench: FloatArray  # B × d
    chi_model: FloatArray  # B × d, NaN where undefined
    X_bench: FloatArray  # d
    X_model: FloatArray  # d, NaN where undefined
    n_benchmarks_active: npt.NDArray[np.int64]  # d: benchmarks with Σ s̃ > 0
    n_benchmarks_scored: npt.NDArray[np.int64]  # d: benchmarks where χ_model is defined
    n_active_rows: npt.NDArray[np.int64]  # d, over all benchmarks
    coverage_class: npt.NDArray[np.int8]  # d, codes into COVERAGE_CLASSES
    coverage_thresholds: ClassThresholds
    benchmark_class: npt.NDArray[np.int8]  # B × d
    benchmark_thresholds: list[ClassThresholds]
    is_model_gap: npt.NDArray[np.bool_]  # d
    uncertainty: Uncertainty  # n_eff, intervals and the difficulty-adjusted gap (added beside the paper's values)

    @property
    def n_benchmarks(self) -> int:
        return len(self.benchmarks)

    def class_names(self, codes: npt.NDArray[np.int8]) -> npt.NDArray[np.str_]:
        return np.asarray(COVERAGE_CLASSES)[codes]


def coverage_classes(
    values: FloatArray, epsilon: float, low_pct: float, high_pct: float
) -> tuple[npt.NDArray[np.int8], ClassThresholds]:
    """missing if value < ε; among the rest, under at/below the low percentile, over at/above the high one."""
    classes = np.full(values.shape, NORMAL, dtype=np.int8)
    missing = values < epsilon
    classes[missing] = MISSING
    present = values[~missing]
    if present.size == 0:
        return classes, ClassThresholds(None, None)
    low, high = np.percentile(present, [low_pct, high_pct])
    classes[~missing & (values <= low)] = UNDER
    classes[~missing & (values >= high)] = OVER
    return classes, ClassThresholds(float(low), float(high))


def chi_bench(act_sum: FloatArray) -> FloatArray:
    """χ_bench(b,c) = Σ_i s̃_{c,i} / ((1/|C|) Σ_{c'} Σ_i s̃_{c',i}); a benchmark with no activation at all is 0."""
    d = act_sum.shape[-1]
    mean_per_concept = act_sum.sum(axis=-1, keepdims=True) / d
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(mean_per_concept > 0, act_sum / mean_per_concept, 0.0)
    return out


def chi_model(weighted_sum: FloatArray, scored_act_sum: FloatArray) -> FloatArray:
    """χ_model(b,c) = Σ m·s̃ / Σ s̃ over scored rows; NaN (undefined) where no scored row activates c."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(scored_act_sum > 0, weighted_sum / scored_act_sum, np.nan)
    # Rounding can push a weighted mean of values in [0,1] a hair outside it.
    return np.clip(out, 0.0, 1.0)


def nanmean_rows(values: FloatArray) -> FloatArray:
    """Column means over defined (non-NaN) entries; NaN where a column has none, without warnings."""
    defined = ~np.isnan(values)
    count = defined.sum(axis=0)
    total = np.where(defined, values, 0.0).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def compute_metrics(acc: CGAccumulator, config: MetricsConfig | None = None) -> CGResult:
    config = config or MetricsConfig()
    names, s = acc.stacked()
    if not names:
        raise ValueError("no rows: cannot compute CG metrics of an empty suite")
    act_sum = s["act_sum"]
    chi_b = chi_bench(act_sum)
    chi_m = chi_model(s["weighted_sum"], s["scored_act_sum"])

    active = act_sum > 0
    n_bench_active = active.sum(axis=0)
    if config.coverage_mean == "all":
        x_bench = chi_b.mean(axis=0)  # paper eq. 3: χ is 0 where inactive, so mean over all of B
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            x_bench = np.where(n_bench_active > 0, chi_b.sum(axis=0) / np.maximum(n_bench_active, 1), 0.0)
    x_model = nanmean_rows(chi_m)

    classes, thresholds = coverage_classes(x_bench, config.epsilon, config.low_percentile, config.high_percentile)
    bench_classes = np.empty(chi_b.shape, dtype=np.int8)
    bench_thresholds = []
    for b in range(len(names)):
        bench_classes[b], t = coverage_classes(chi_b[b], config.epsilon, config.low_percentile, config.high_percentile)
        bench_thresholds.append(t)

    sums = [acc.benchmarks[n] for n in names]
    n_scored = np.array([x.n_scored_rows for x in sums], dtype=np.int64)
    score_sum = np.array([x.score_sum for x in sums])
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_score = np.where(n_scored > 0, score_sum / np.maximum(n_scored, 1), np.nan)

    return CGResult(
        config=config,
        d_sae=acc.d_sae,
        benchmarks=names,
        n_rows=np.array([x.n_rows for x in sums], dtype=np.int64),
        n_scored_rows=n_scored,
        mean_score=mean_score,
        act_sum=act_sum,
        active_rows=s["active_rows"].astype(np.int64),
        chi_bench=chi_b,
        chi_model=chi_m,
        X_bench=x_bench,
        X_model=x_model,
        n_benchmarks_active=n_bench_active.astype(np.int64),
        n_benchmarks_scored=(~np.isnan(chi_m)).sum(axis=0).astype(np.int64),
        n_active_rows=s["active_rows"].sum(axis=0).astype(np.int64),
        coverage_class=classes,
        coverage_thresholds=thresholds,
        benchmark_class=bench_classes,
        benchmark_thresholds=bench_thresholds,
        is_model_gap=~np.isnan(x_model) & (x_model < config.model_gap_epsilon),
        uncertainty=compute_uncertainty(s["scored_act_sum"], s["scored_act_sq_sum"], chi_m, chi_b, x_model, mean_score),
    )
