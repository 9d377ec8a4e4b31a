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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from cg_ray.arrays import FloatArray
from cg_ray.metrics.uncertainty import wilson_interval

MIN_N_EFF = 2.0  # below this the interval is undefined (NaN) and the concept is not ranked


class ResidualAccumulator:
    """The residual sums per concept over scored active rows, for the whole suite and for each split's choosing
    half from the same pass: Σ s̃, Σ s̃², Σ s̃ m per part of the splits (a half's sums are its parts' sum), Σ s̃ e
    with the run's cell means over every row, and per split Σ s̃ eₛ over its choosing rows with the cell means of
    that half (`splits.Split.expected`), so no ranking subtracts a mean the test half helped make."""

    def __init__(self, d_sae: int, parts: int = 1, splits: int = 0) -> None:
        self.d_sae = d_sae
        self.parts = parts
        self.part_sums = np.zeros((parts, 3, d_sae), dtype=np.float64)
        self.e_all = np.zeros(d_sae, dtype=np.float64)
        self.e_split = np.zeros((splits, d_sae), dtype=np.float64)

    def add(
        self,
        offsets: npt.NDArray[np.int64],
        concept_ids: npt.NDArray[np.integer],
        concept_acts: npt.NDArray[np.floating],
        scores: FloatArray,
        expected: FloatArray,
        part: npt.NDArray[np.integer] | None = None,
        split_expected: Sequence[FloatArray] = (),
        choosing: Sequence[npt.NDArray[np.bool_]] = (),
    ) -> None:
        """Rows as CSR (offsets start at 0) with each row's score (NaN: unscored, skipped), cell mean and part;
        per split, its rows' cell means and whether they choose (the batch's slice of each)."""
        lengths = np.diff(offsets)
        row_of = np.repeat(np.arange(lengths.size), lengths)
        m, e = scores[row_of], expected[row_of]
        w = np.asarray(concept_acts, dtype=np.float64)
        ok = (w > 0) & ~np.isnan(m) & ~np.isnan(e)
        if not ok.any():
            return
        ids, w, m, e, row_of = np.asarray(concept_ids, dtype=np.int64)[ok], w[ok], m[ok], e[ok], row_of[ok]
        self.e_all += np.bincount(ids, weights=w * e, minlength=self.d_sae)
        keyed = ids if part is None or self.parts == 1 else ids + np.asarray(part, np.int64)[row_of] * self.d_sae
        for k, weights in enumerate((w, w * w, w * m)):  # one bincount over (part, concept) pairs
            self.part_sums[:, k, :] += np.bincount(keyed, weights=weights, minlength=self.parts * self.d_sae).reshape(
                self.parts, self.d_sae
            )
        if split_expected:
            self.e_split += _split_sums(ids, w, row_of, lengths.size, self.d_sae, split_expected, choosing)

    def finish(self, confidence: float = 0.95) -> Residuals:
        """The residuals over every row, against the run's own cell means (the in-sample figures shown)."""
        return _residuals(self.part_sums.sum(axis=0), self.e_all, confidence)

    def finish_split(self, split: int, parts: npt.NDArray[np.bool_], confidence: float = 0.95) -> Residuals:
        """The residuals over a split's choosing half (`parts`: its parts), against that half's cell means."""
        return _residuals(self.part_sums[parts].sum(axis=0), self.e_split[split], confidence)


def _split_sums(
    ids: npt.NDArray[np.int64],
    w: FloatArray,
    row_of: npt.NDArray[np.int64],
    n_rows: int,
    d_sae: int,
    split_expected: Sequence[FloatArray],
    choosing: Sequence[npt.NDArray[np.bool_]],
) -> FloatArray:
    """Per split, Σ s̃ eₛ over its choosing rows: one sparse product of the (row × concept) activations with the
    (row × split) matrix of the rows' split cell means, 0 where a row does not choose. A masked bincount per
    split made ten passes over the entries, as much CPU as the rest of the pass (docs/performance.md)."""
    indptr = np.zeros(n_rows + 1, dtype=np.int64)  # the kept entries stay in row order: CSR without a sort
    np.cumsum(np.bincount(row_of, minlength=n_rows), out=indptr[1:])
    acts = sparse.csr_matrix((w, ids, indptr), shape=(n_rows, d_sae))
    chosen = np.column_stack(
        [np.where(np.asarray(c, dtype=bool), e_s, 0.0) for e_s, c in zip(split_expected, choosing, strict=True)]
    )
    sums: FloatArray = np.asarray(acts.T @ chosen).T
    return sums


def _residuals(sums: FloatArray, s_we: FloatArray, confidence: float) -> Residuals:
    s_w, s_w2, s_wm = sums  # summed, not subtracted: no cancellation leaves a ghost Σ s̃
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
