"""Residual (metadata-adjusted) gaps: how much worse a concept's rows score than their own cells predict.

For each scored row, r = score − e, with e the mean score of the row's cell (`strata.expected_scores` over
the fields adjusted for). Per concept c, over the scored rows where it is active (s̃ > 0):

    residual(c) = Σ s̃ r / Σ s̃

the generalisation of the difficulty-adjusted gap from benchmark means to any stratification (adjusted for
`benchmark` alone it is that gap pooled by rows instead of by benchmarks). Its interval: the sandwich
variance of a weighted mean, Σ s̃² (r − r̄)² / (Σ s̃)², with a t quantile on n_eff − 1 degrees of freedom,
n_eff = (Σ s̃)² / Σ s̃² (Kish). A concept that only tracks a metadata value adjusted for has residual ≈ 0
and an interval covering 0. All five sums are additive over rows, so this streams: memory O(d_sae).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

FloatArray = npt.NDArray[np.float64]

MIN_N_EFF = 2.0  # below this the interval is undefined (NaN) and the concept is not ranked


class ResidualAccumulator:
    """Σ s̃, Σ s̃², Σ s̃ r, Σ s̃² r, Σ s̃² r² per concept over scored active rows."""

    def __init__(self, d_sae: int) -> None:
        self.d_sae = d_sae
        self.sums = np.zeros((5, d_sae), dtype=np.float64)

    def add(
        self,
        offsets: npt.NDArray[np.int64],
        concept_ids: npt.NDArray[np.integer],
        concept_acts: npt.NDArray[np.floating],
        residuals: FloatArray,
    ) -> None:
        """Rows as CSR (offsets start at 0) with one residual per row (NaN: unscored, skipped)."""
        r = np.repeat(residuals, np.diff(offsets))
        w = np.asarray(concept_acts, dtype=np.float64)
        ok = (w > 0) & ~np.isnan(r)
        if not ok.any():
            return
        ids, w, r = np.asarray(concept_ids)[ok], w[ok], r[ok]
        w2 = w * w
        for k, weights in enumerate((w, w2, w * r, w2 * r, w2 * r * r)):
            self.sums[k] += np.bincount(ids, weights=weights, minlength=self.d_sae)

    def finish(self, confidence: float = 0.95) -> Residuals:
        s_w, s_w2, s_wr, s_w2r, s_w2r2 = self.sums
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(s_w > 0, s_wr / s_w, np.nan)
            n_eff = np.where(s_w2 > 0, s_w * s_w / s_w2, np.nan)
            # Σ s̃² (r − r̄)² expanded into the accumulated sums.
            spread = np.maximum(s_w2r2 - 2 * mean * s_w2r + mean * mean * s_w2, 0.0)
            se = np.sqrt(spread) / s_w
            t = stats.t.ppf(0.5 + confidence / 2, np.maximum(n_eff - 1, 1.0))
        defined = n_eff >= MIN_N_EFF
        low = np.where(defined, np.clip(mean - t * se, -1.0, 1.0), np.nan)
        high = np.where(defined, np.clip(mean + t * se, -1.0, 1.0), np.nan)
        return Residuals(mean, low, high, n_eff)


@dataclass(frozen=True)
class Residuals:
    """Per concept (NaN where no scored row is active)."""

    residual: FloatArray
    low: FloatArray
    high: FloatArray
    n_eff: FloatArray


def residual_order(res: Residuals, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Concepts in `mask` with a defined interval, most confidently below their cells first (the upper end
    ascending; ties: larger n_eff, then id)."""
    idx = np.flatnonzero(mask & ~np.isnan(res.high))
    order = np.lexsort((idx, -np.nan_to_num(res.n_eff[idx]), res.high[idx]))
    out: npt.NDArray[np.int64] = idx[order].astype(np.int64)
    return out
