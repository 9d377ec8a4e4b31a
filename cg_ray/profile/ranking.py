"""Orders of concepts for the profiles: weakest first, strongest first, least covered first.

Pure functions of a `CGResult`. Eligibility is the paper's filter (active in ≥ `min_benchmarks` benchmarks
and ≥ `min_rows` rows) plus a defined X_model. Orders (`rank_by`):

- `x_model`: X_model ascending (the paper's plain ranking);
- `upper_bound` (default): the upper end of X_model's 95% interval ascending — rank 1 is the concept the
  model is most *confidently* weak on (EvalTree's rule); a low X_model on little support has a high upper
  end and drops down;
- `adjusted_gap`: the upper end of the difficulty-adjusted gap's interval ascending.

Ties are broken by effective support (larger first), then concept id, so orders are reproducible.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from cg_ray.arrays import IntArray
from cg_ray.metrics.compute import UNDER, CGResult

RankBy = Literal["x_model", "upper_bound", "adjusted_gap"]
RANK_BY: tuple[RankBy, ...] = ("x_model", "upper_bound", "adjusted_gap")


def eligible(result: CGResult) -> npt.NDArray[np.bool_]:
    cfg = result.config
    mask: npt.NDArray[np.bool_] = (
        (result.n_benchmarks_active >= cfg.min_benchmarks)
        & (result.n_active_rows >= cfg.min_rows)
        & ~np.isnan(result.X_model)
    )
    return mask


def _keys(result: CGResult, rank_by: RankBy, strongest: bool) -> npt.NDArray[np.float64]:
    u = result.uncertainty
    if rank_by == "x_model":
        key = result.X_model
    elif rank_by == "upper_bound":
        key = u.X_model_low if strongest else u.X_model_high
    elif rank_by == "adjusted_gap":
        key = u.adjusted_gap_low if strongest else u.adjusted_gap_high
    else:
        raise ValueError(f"unknown rank_by {rank_by!r}; choose one of {RANK_BY}")
    return -key if strongest else key


def _order(mask: npt.NDArray[np.bool_], key: npt.NDArray[np.float64], support: npt.NDArray[np.float64]) -> IntArray:
    idx = np.flatnonzero(mask & ~np.isnan(key))
    order = np.lexsort((idx, -np.nan_to_num(support[idx], nan=0.0), key[idx]))
    ranked: IntArray = idx[order].astype(np.int64)
    return ranked


def weakness_order(
    result: CGResult, rank_by: RankBy | None = None, mask: npt.NDArray[np.bool_] | None = None
) -> IntArray:
    """Eligible concepts, most confidently weak first."""
    rank_by = rank_by or result.config.rank_by
    mask = eligible(result) if mask is None else mask
    return _order(mask, _keys(result, rank_by, strongest=False), result.uncertainty.concept_n_eff)


def strength_order(result: CGResult, rank_by: RankBy | None = None) -> IntArray:
    """Eligible concepts, most confidently strong first (the lower end of the interval, descending)."""
    rank_by = rank_by or result.config.rank_by
    return _order(eligible(result), _keys(result, rank_by, strongest=True), result.uncertainty.concept_n_eff)


def coverage_gap_order(result: CGResult) -> IntArray:
    """Under-covered concepts (class `under`; present, at or below the low percentile), least covered first.

    No row filter: under-covered concepts are rare by definition. Ties by active rows, then id.
    """
    mask = result.coverage_class == UNDER
    return _order(mask, result.X_bench.astype(np.float64), result.n_active_rows.astype(np.float64))
