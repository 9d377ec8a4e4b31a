"""`cg-ray validate`, beyond the metadata: do slices, failure modes and concept rankings built on the fit
part flag held-out rows that score below what their own metadata cell predicts?

Everything is built on the fit part only: the slices, the fields adjusted for, the cell means, the residual
gaps and the failure modes. On the test part, for each ranking and k = 1..max_k, over the test rows the
first k entries flag (a slice: its rows; a mode: rows where any member is active; a concept: its active
rows):
- lift: mean of score − the row's benchmark mean on the test part (as the profile's lift);
- residual lift: mean of score − the row's fit-part cell mean, the part the metadata does not explain.
Both with percentile-bootstrap intervals over the flagged rows; random concepts are the baseline (the mean
over `n_random` draws and its 2.5–97.5 percentiles).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import sparse, stats

from cg_ray.arrays import BoolArray, FloatArray, IntArray
from cg_ray.config import MetricsConfig
from cg_ray.metrics.compute import CGResult
from cg_ray.metrics.robustness import RowTable
from cg_ray.profile.crossfit import POOL_FACTOR, PoolRows
from cg_ray.profile.grouping import pool_activity_from_csr
from cg_ray.profile.modes import (
    DUPLICATE_JACCARD,
    ClassStats,
    ModeClass,
    group_modes,
    merge_contained,
    rank_modes,
    summarise,
)
from cg_ray.profile.ranking import eligible
from cg_ray.profile.residual import ResidualAccumulator, residual_order
from cg_ray.profile.slices import best_fields, weakest_slices
from cg_ray.profile.strata import RowFrame, expected_scores, parse_adjust_for


def fit_modes(
    fit: RowTable, expected: FloatArray, result: CGResult, cfg: MetricsConfig
) -> tuple[list[list[int]], list[int]]:
    """(failure modes as concept lists, concepts in residual order) built on the fit rows (`expected`: their
    cell means)."""
    acc = ResidualAccumulator(fit.d_sae)
    acc.add(fit.offsets, fit.concept_ids, fit.concept_acts, fit.scores, expected)
    res = acc.finish()
    order = residual_order(res, eligible(result) & (np.nan_to_num(res.residual) < 0))
    head = [int(c) for c in order[: POOL_FACTOR * cfg.top_k]]
    if not head:
        return [], []
    activity = pool_activity_from_csr(fit.offsets, fit.concept_ids, fit.concept_acts, head, fit.d_sae)
    groups = group_modes(head, activity, cfg.mode_jaccard)
    st = ClassStats(groups, fit.d_sae, keep_rows=0)
    st.add(fit.offsets, fit.concept_ids, fit.concept_acts, np.arange(fit.n_rows), fit.scores, expected)
    ranked = rank_modes(groups, summarise(st), st.inter, DUPLICATE_JACCARD)
    # The list the run shows merges modes with the same rows: validate that list, not the unmerged one (the
    # merge by shared words needs the texts, which the validation's row table does not carry).
    pool = PoolRows(head, fit.d_sae)
    pool.add(fit.offsets, fit.concept_ids, fit.concept_acts)
    pool.finish()
    merged = merge_contained([ModeClass(tuple(m), pool.members(m)[0]) for _, m in ranked])
    return [list(m.members) for m in merged][: cfg.top_k], [int(c) for c in order]


def _curve(flags: Sequence[BoolArray], values: FloatArray, max_k: int, n_boot: int, seed: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    covered = np.zeros(values.size, dtype=bool)
    for k, flag in enumerate(flags[:max_k], start=1):
        covered |= flag
        x = values[covered]
        entry: dict[str, Any] = {"k": k, "n_rows": int(x.size), "value": None, "low": None, "high": None}
        if x.size:
            entry["value"] = float(x.mean())
            if n_boot and x.size >= 2 and not np.all(x == x[0]):
                ci = stats.bootstrap(
                    (x,), np.mean, n_resamples=n_boot, method="percentile", rng=np.random.default_rng(seed + k)
                ).confidence_interval
                entry["low"], entry["high"] = float(ci.low), float(ci.high)
        out.append(entry)
    return out


def beyond_validation(
    table: RowTable,
    frame: RowFrame,
    test_mask: BoolArray,
    fit: RowTable,
    test: RowTable,
    result: CGResult,
    rankings: dict[str, list[int]],
    benchmark_residual: FloatArray,
    incidence: sparse.csc_matrix,
    *,
    max_k: int,
    n_bootstrap: int,
    n_random: int,
    seed: int,
) -> dict[str, Any]:
    """The `beyond` block of validate.json (see the module doc). `frame` holds the same rows as `table`;
    `benchmark_residual` and `incidence` are the test rows' score − benchmark mean and rows × concepts
    activity (`validate.TestPart`)."""
    cfg = result.config
    fit_frame = frame.subset(np.flatnonzero(~test_mask))
    slices = weakest_slices(fit_frame, max_k, cfg.slice_order, cfg.slice_min_rows) if fit_frame.codes else []
    fields, notes = parse_adjust_for(cfg.adjust_for, fit_frame, best_fields(slices))
    expected = expected_scores(frame, fields, fit=~test_mask)
    fit_modes_, residual_concepts = fit_modes(fit, expected[~test_mask], result, cfg)
    test_frame = frame.subset(np.flatnonzero(test_mask))
    residual = test.scores - expected[test_mask]
    inc = incidence

    def concept_flags(concepts: Sequence[int]) -> list[BoolArray]:
        return [inc[:, [c]].toarray().ravel() > 0 for c in concepts]

    flag_sets: dict[str, list[BoolArray]] = {
        "slices": [s.mask(test_frame) for s in slices],
        "failure_modes": [np.asarray(inc[:, m].sum(axis=1)).ravel() > 0 for m in fit_modes_],
        "residual": concept_flags(residual_concepts[:max_k]),
        **{name: concept_flags(concepts[:max_k]) for name, concepts in rankings.items()},
    }
    curves = {
        name: {
            "lift": _curve(flags, benchmark_residual, max_k, n_bootstrap, seed),
            "residual_lift": _curve(flags, residual, max_k, n_bootstrap, seed),
        }
        for name, flags in flag_sets.items()
    }
    pool = np.flatnonzero(eligible(result))
    curves["random"] = _random(pool, concept_flags, benchmark_residual, residual, max_k, n_random, seed)
    return {
        "adjusted_for": fields,
        "notes": notes,
        "slices": [s.text(fit_frame) for s in slices],
        "failure_modes": fit_modes_,
        "rankings": curves,
    }


def _random(
    pool: IntArray,
    concept_flags: Callable[[Sequence[int]], list[BoolArray]],
    lift_values: FloatArray,
    residual_values: FloatArray,
    max_k: int,
    n_random: int,
    seed: int,
) -> dict[str, list[dict[str, Any]]]:
    rng = np.random.default_rng(seed + 2)
    draws: dict[str, list[list[float]]] = {"lift": [], "residual_lift": []}
    for _ in range(n_random):
        flags = concept_flags([int(c) for c in rng.permutation(pool)[:max_k]])
        for key, values in (("lift", lift_values), ("residual_lift", residual_values)):
            draws[key].append(
                [np.nan if e["value"] is None else e["value"] for e in _curve(flags, values, max_k, 0, 0)]
            )
    return {
        key: draw_summary(rows, "k", list(range(1, len(rows[0]) + 1)) if rows else []) for key, rows in draws.items()
    }


def draw_summary(values: Sequence[Sequence[float | None]], key: str, labels: Sequence[int]) -> list[dict[str, Any]]:
    """Per position along the draws' curves: the mean over the draws and their 2.5–97.5 percentiles (a
    position no draw reaches, or one all draws leave undefined, gets nulls)."""
    arr = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=np.float64)
    out = []
    for j, label in enumerate(labels):
        col = arr[:, j][~np.isnan(arr[:, j])] if arr.ndim == 2 and j < arr.shape[1] else np.zeros(0)
        out.append(
            {
                key: label,
                "value": float(col.mean()) if col.size else None,
                "low": float(np.quantile(col, 0.025)) if col.size else None,
                "high": float(np.quantile(col, 0.975)) if col.size else None,
            }
        )
    return out
