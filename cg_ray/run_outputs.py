"""Write the metrics artifacts of a run directory (see docs/usage.md, "Run directory")."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cg_ray import __version__
from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.rows import RowsFile, open_rows
from cg_ray.config import MetricsConfig
from cg_ray.labels import ConceptLabels
from cg_ray.metrics.compute import CGResult
from cg_ray.metrics.overlap import correlation_matrix, jaccard_matrix
from cg_ray.metrics.rankings import Rankings, rank_concepts
from cg_ray.profile.findings import Gathered
from cg_ray.profile.judgement import Judgement, Measured, judge, measure
from cg_ray.profile.weaknesses import ProfileChoice, build_profiles, choose_profiles, write_profiles


def json_number(x: float | np.floating | None) -> float | None:
    """JSON-safe float: NaN/inf (undefined) become null."""
    if x is None:
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def nullable_floats(values: np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.float64(), from_pandas=True)  # NaN -> null


def concepts_table(result: CGResult, labels: ConceptLabels | None, beyond: Gathered | None = None) -> pa.Table:
    ids = np.arange(result.d_sae, dtype=np.int32)
    nulls = np.full(result.d_sae, np.nan)
    res = beyond.residuals if beyond is not None else None
    label_col = pa.array([labels.get(int(i)) for i in ids] if labels else [None] * result.d_sae, pa.string())
    u = result.uncertainty
    return pa.Table.from_arrays(
        [
            pa.array(ids),
            label_col,
            pa.array(result.X_bench, pa.float64()),
            nullable_floats(result.X_model),
            pa.array(result.n_benchmarks_active.astype(np.int32)),
            pa.array(result.n_active_rows),
            pa.array(result.class_names(result.coverage_class)),
            pa.array(result.is_model_gap),
            nullable_floats(u.concept_n_eff),
            *(nullable_floats(getattr(u, name)) for name in S.INTERVAL_COLUMNS),
            *(nullable_floats(v) for v in ((res.residual, res.low, res.high) if res else (nulls,) * 3)),
            pa.array([beyond.adjusted_for if beyond else None] * result.d_sae, pa.list_(pa.string())),
        ],
        schema=S.CONCEPTS_SCHEMA,
    )


def benchmark_concepts_table(result: CGResult) -> pa.Table:
    b_idx, c_idx = np.nonzero(result.act_sum > 0)
    names = np.asarray(result.benchmarks, dtype=object)
    return pa.Table.from_arrays(
        [
            pa.array(names[b_idx], pa.string()),
            pa.array(c_idx.astype(np.int32)),
            pa.array(result.chi_bench[b_idx, c_idx], pa.float64()),
            nullable_floats(result.chi_model[b_idx, c_idx]),
            pa.array(result.active_rows[b_idx, c_idx].astype(np.int64)),
            pa.array(result.class_names(result.benchmark_class[b_idx, c_idx])),
            nullable_floats(result.uncertainty.n_eff[b_idx, c_idx]),
            nullable_floats(result.uncertainty.chi_model_low[b_idx, c_idx]),
            nullable_floats(result.uncertainty.chi_model_high[b_idx, c_idx]),
        ],
        schema=S.BENCHMARK_CONCEPTS_SCHEMA,
    )


def _concept_entry(result: CGResult, labels: ConceptLabels | None, c: int) -> dict[str, Any]:
    return {
        "concept_id": c,
        "label": labels.get(c) if labels else None,
        "X_model": json_number(result.X_model[c]),
        "X_bench": json_number(result.X_bench[c]),
        "n_benchmarks_active": int(result.n_benchmarks_active[c]),
        "n_active_rows": int(result.n_active_rows[c]),
    }


def summary_dict(
    result: CGResult, rankings: Rankings, labels: ConceptLabels | None, extra: Mapping[str, object] | None = None
) -> dict[str, Any]:
    cfg = result.config
    d = result.d_sae
    classes = result.coverage_class
    defined_x_model = result.X_model[~np.isnan(result.X_model)]
    present = result.X_bench >= cfg.epsilon
    jac = jaccard_matrix(result.chi_bench)
    corr, n_common = correlation_matrix(result.chi_model)
    per_benchmark = []
    for b, name in enumerate(result.benchmarks):
        chi_m = result.chi_model[b]
        defined = chi_m[~np.isnan(chi_m)]
        counts = np.bincount(result.benchmark_class[b], minlength=len(S.COVERAGE_CLASSES))
        per_benchmark.append(
            {
                "benchmark": name,
                "n_rows": int(result.n_rows[b]),
                "n_scored_rows": int(result.n_scored_rows[b]),
                "mean_score": json_number(result.mean_score[b]),
                "n_active_concepts": int((result.act_sum[b] > 0).sum()),
                "missing_pct": 100.0 * float((result.chi_bench[b] < cfg.epsilon).mean()),
                "class_counts": dict(zip(S.COVERAGE_CLASSES, map(int, counts), strict=True)),
                "median_chi_model": json_number(np.median(defined)) if defined.size else None,
                "thresholds": result.benchmark_thresholds[b].as_dict(),
            }
        )
    suite_counts = np.bincount(classes, minlength=len(S.COVERAGE_CLASSES))
    ranking_lists = {
        key: [_concept_entry(result, labels, c) for c in getattr(rankings, key)]
        for key in ("best_model", "worst_model", "most_covered", "least_covered")
    }

    def matrix(m: np.ndarray) -> list[list[float | None]]:
        return [[json_number(v) for v in row] for row in m]

    return {
        "cg_ray_version": __version__,
        "d_sae": d,
        "n_rows": int(result.n_rows.sum()),
        "n_scored_rows": int(result.n_scored_rows.sum()),
        "config": cfg.model_dump(),
        "labels": {"path": labels.path, "source": labels.source, "n_labels": len(labels)} if labels else None,
        "suite": {
            "n_benchmarks": result.n_benchmarks,
            "class_counts": dict(zip(S.COVERAGE_CLASSES, map(int, suite_counts), strict=True)),
            "missing_pct": 100.0 * float((~present).mean()),
            "thresholds": result.coverage_thresholds.as_dict(),
            "median_X_bench": json_number(np.median(result.X_bench[present])) if present.any() else None,
            "median_X_model": json_number(np.median(defined_x_model)) if defined_x_model.size else None,
            "n_concepts_scored": int(defined_x_model.size),
            "n_model_gaps": int(result.is_model_gap.sum()),
        },
        "benchmarks": per_benchmark,
        "jaccard": {"benchmarks": result.benchmarks, "matrix": matrix(jac)},
        "correlation": {
            "benchmarks": result.benchmarks,
            "method": "pearson over concepts with chi_model defined in both",
            "matrix": matrix(corr),
            "n_common": n_common.tolist(),
        },
        "rankings": {"n_eligible": int(rankings.eligible.sum()), **ranking_lists},
        **(extra or {}),
    }


def write_official_csvs(run: RunDir, result: CGResult) -> None:
    """The official CG code's outputs, so existing plotting code reads ours unchanged."""
    ids = pa.array(np.arange(result.d_sae, dtype=np.int32))
    run.write(S.OFFICIAL_COVERAGE_CSV, pa.table({"concept_id": ids, "cg_coverage": pa.array(result.X_bench)}))
    b_idx, c_idx = np.nonzero(result.act_sum > 0)
    order = np.lexsort((b_idx, c_idx))  # by concept, then benchmark
    names = np.asarray(result.benchmarks, dtype=object)
    saliency = {
        "concept_id": pa.array(c_idx[order].astype(np.int32)),
        "benchmark": pa.array(names[b_idx[order]], pa.string()),
        "saliency_score": pa.array(result.chi_bench[b_idx[order], c_idx[order]]),
    }
    run.write(S.OFFICIAL_SALIENCY_CSV, pa.table(saliency))
    scores = {"concept_id": ids, "overall_score": nullable_floats(result.X_model)}
    for b, name in enumerate(result.benchmarks):
        scores[f"{name}_score"] = nullable_floats(result.chi_model[b])
    run.write(S.OFFICIAL_SCORES_CSV, pa.table(scores))


@dataclass(frozen=True)
class PublishedMetrics:
    result: CGResult
    summary: dict[str, Any]
    aggregate_s: float  # reading and accumulating the rows


def judged_profiles(
    rows_path: str | os.PathLike[str], model: str, config: MetricsConfig, labels: ConceptLabels | None = None
) -> dict[str, pa.Table]:
    """The profile tables `publish_metrics` writes — each entry with its held-out verdict — for a rows file
    outside a run directory (`cg-ray arena-head-to-head --rows MODEL=PATH`): `model`'s rows of it when it has
    a model column."""
    rows = open_rows(rows_path)
    mine = model if rows.has_model_column else None
    measured = measure(rows, mine, config)
    choice, judgement = judge_profiles(rows, Path(rows_path), mine, measured, config, labels)
    return build_profiles(measured.result, labels, choice, None, judgement)


def judge_profiles(
    rows: RowsFile,
    rows_path: Path,
    model: str | None,
    measured: Measured,
    config: MetricsConfig,
    labels: ConceptLabels | None,
) -> tuple[ProfileChoice, Judgement]:
    """The profiles' entries, chosen from the metrics, and the run's one judgement, which describes them."""
    choice = choose_profiles(measured.result, rows_path, model)
    return choice, judge(rows, model, measured.gathered, config, choice.concepts, labels)


def publish_metrics(
    run: RunDir,
    config: MetricsConfig,
    labels: ConceptLabels | None = None,
    extra_summary: Mapping[str, object] | None = None,
    *,
    model: str | None = None,
    rows: RowsFile | None = None,
    record_timing: bool = False,
) -> PublishedMetrics:
    """The metrics half of every producer (`cg-ray metrics`, `cg-ray run`, a service analysis, each arena
    model): accumulate `run/rows.parquet` (already in place; `rows` if it is already open), compute
    the CG metrics once, and write the rest of the run directory next to it: concepts, benchmark
    concepts, the official CSVs, the profiles (weaknesses, strengths, coverage gaps; they read the rows of
    `model` for near-duplicate groups and example rows) and summary.json."""
    rows = rows or open_rows(run.rows)
    measured = measure(rows, model, config)
    result = measured.result
    extra = dict(extra_summary or {})
    run.write(S.CONCEPTS_FILE, concepts_table(result, labels, measured.gathered))
    run.write(S.BENCHMARK_CONCEPTS_FILE, benchmark_concepts_table(result))
    write_official_csvs(run, result)
    t_profiles = time.perf_counter()
    choice, judgement = judge_profiles(rows, run.rows, model, measured, config, labels)
    extra["profile"] = write_profiles(run, result, labels, choice, judgement)  # with the failure modes
    if record_timing:
        extra["timings_s"] = {
            "aggregate": round(measured.aggregate_s, 3),  # with the residual gaps
            "metadata_and_slices": round(measured.beyond_s, 3),
            "profiles_and_failure_modes": round(time.perf_counter() - t_profiles, 3),
        }
    summary = summary_dict(result, rank_concepts(result), labels, extra)
    written = run.write_json(S.SUMMARY_FILE, summary, allow_nan=False)
    return PublishedMetrics(result, written, measured.aggregate_s)
