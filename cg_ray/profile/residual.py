"""Residual (metadata-adjusted) gaps: how much worse a concept's rows score than their own cells predict.

For each scored row, e = the mean score of the row's cell (`strata.expected_scores` over the fields adjusted
for). Per concept c, over the scored rows where it is active (s̃ > 0):

    residual(c) = Σ s̃ (m − e) / Σ s̃ = χ̃(c) − ẽ(c)

(χ̃ the s̃-weighted mean score, ẽ the s̃-weighted mean of the cells' means): the generalisation of the
difficulty-adjusted gap from benchmark means to any stratification. Its interval is n_eff-based, as the
X_model interval (`metrics.uncertainty`): the Wilson interval of χ̃ with n_eff = (Σ s̃)² / Σ s̃² trials,
shifted by ẽ (the cell means, estimated from many more rows, are treated as known). Wilson's Bernoulli
variance bounds that of any score in [0, 1] with the same mean, so the interval is conservative for graded
scores, and unlike a sample variance it never collapses to a point when all the rows fail. A concept that
only tracks a metadata value adjusted for has residual ≈ 0 and an interval covering 0. The four sums are
additive over rows, so this streams: memory O(d_sae).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cg_ray.metrics.uncertainty import wilson_interval

FloatArray = npt.NDArray[np.float64]

MIN_N_EFF = 2.0  # below this the interval is undefined (NaN) and the concept is not ranked


class ResidualAccumulator:
    """Σ s̃, Σ s̃², Σ s̃ m, Σ s̃ e per concept over scored active rows, kept per fold of the cross-fitting
    (`folds` = 1: one sum), so the residuals of every fold's training part (all folds but one) come from the
    same pass as the in-sample ones."""

    def __init__(self, d_sae: int, folds: int = 1) -> None:
        self.d_sae = d_sae
        self.folds = folds
        self.sums = np.zeros((folds, 4, d_sae), dtype=np.float64)

    def add(
        self,
        offsets: npt.NDArray[np.int64],
        concept_ids: npt.NDArray[np.integer],
        concept_acts: npt.NDArray[np.floating],
        scores: FloatArray,
        expected: FloatArray,
        fold: npt.NDArray[np.integer] | None = None,
    ) -> None:
        """Rows as CSR (offsets start at 0) with each row's score (NaN: unscored, skipped), cell mean and fold."""
        lengths = np.diff(offsets)
        m, e = np.repeat(scores, lengths), np.repeat(expected, lengths)
        w = np.asarray(concept_acts, dtype=np.float64)
        ok = (w > 0) & ~np.isnan(m) & ~np.isnan(e)
        if not ok.any():
            return
        ids, w, m, e = np.asarray(concept_ids, dtype=np.int64)[ok], w[ok], m[ok], e[ok]
        if fold is not None and self.folds > 1:  # one bincount over (fold, concept) pairs
            ids = ids + np.repeat(np.asarray(fold, dtype=np.int64), lengths)[ok] * self.d_sae
        flat = self.sums.reshape(self.folds, 4, self.d_sae)
        for k, weights in enumerate((w, w * w, w * m, w * e)):
            flat[:, k, :] += np.bincount(ids, weights=weights, minlength=self.folds * self.d_sae).reshape(
                self.folds, self.d_sae
            )

    def finish(self, confidence: float = 0.95, leave_out: int | None = None) -> Residuals:
        """The residuals over every fold, or over all folds but `leave_out` (a fold's training part)."""
        keep = np.arange(self.folds) != (-1 if leave_out is None else leave_out)
        sums = self.sums[keep].sum(axis=0)  # summed, not subtracted: no cancellation leaves a ghost Σ s̃
        s_w, s_w2, s_wm, s_we = sums
        with np.errstate(divide="ignore", invalid="ignore"):
            chi = np.where(s_w > 0, s_wm / s_w, np.nan)
            cell = np.where(s_w > 0, s_we / s_w, np.nan)
            n_eff = np.where(s_w2 > 0, s_w * s_w / s_w2, np.nan)
        defined = n_eff >= MIN_N_EFF
        low, high = wilson_interval(np.where(defined, chi, np.nan), n_eff, confidence)
        return Residuals(chi - cell, np.clip(low - cell, -1.0, 1.0), np.clip(high - cell, -1.0, 1.0), n_eff)


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
