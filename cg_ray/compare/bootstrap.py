"""Paired bootstrap of ΔX_model and Δχ_model between two runs over the rows they share. Pure numpy/scipy.

Method. The paired rows (same benchmark and row_id, scored in both runs) are resampled with replacement,
stratified by benchmark (each benchmark keeps its number of rows, as in the suite), and the *same*
resample is applied to both runs — that is the pairing: a row drawn k times counts k times in A and in B,
so row-to-row difficulty cancels in the difference and the interval is much narrower than that of two
independent intervals. A resample is a vector of multinomial counts w (Σ_{i∈b} w_i = n_b per benchmark),
so resampled sums are weighted sums, Σ_i w_i m_i s̃_{c,i} and Σ_i w_i s̃_{c,i}, and R resamples at once are
one dense (R × n_b) by sparse (n_b × concepts) product per benchmark and run: no per-resample Python loop.
From those sums χ_model, X_model and their differences follow with the CG formulas of `cg_ray.metrics`
(`chi_model`; X_model = mean of χ_model over the benchmarks where it is defined, `nanmean_rows`).
Row 0 of every weight matrix is all ones: the point estimate is the same computation on the sample
itself. Intervals are percentile intervals of the R resampled differences; a resample in which a concept
is undefined (none of its rows drawn) is left out for that concept. Identical runs give a difference of
exactly 0 in every resample, so their intervals are [0, 0].

Relative change. When B is better everywhere, nearly every concept improves; what stands out is a concept
that moved *less* (or more) than its benchmarks did. rel(c) = mean over c's benchmarks of
Δχ_model(b,c) − Δμ_b, where μ_b is benchmark b's mean score over its paired rows, in the same resample (the
difference-in-differences analogue of the difficulty-adjusted gap of `cg_ray.metrics.uncertainty`).

Memory: O(R × n_b) for one benchmark's weights plus O(B × R × chunk) per array, with concepts processed
in chunks of at most `max_cells // ((R + 1) × B)` columns; weights come from per-benchmark seeds, so
every chunk sees the same resamples (kept when R × n is small, else redrawn per chunk).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from cg_ray.arrays import FloatArray, IntArray
from cg_ray.metrics.compute import chi_model, nanmean_rows

MAX_CELLS = 4_000_000  # (resamples + 1) × concept columns per array of a chunk (~32 MB in float64)


@dataclass(frozen=True)
class PairedSample:
    """The paired rows of both runs: s̃ over the concepts compared (columns), scores, benchmark codes."""

    acts_a: sparse.csr_matrix  # n × k
    acts_b: sparse.csr_matrix  # n × k
    scores_a: FloatArray  # n
    scores_b: FloatArray  # n
    codes: IntArray  # n, into range(n_benchmarks)
    n_benchmarks: int

    @property
    def n_concepts(self) -> int:
        return int(self.acts_a.shape[1])


@dataclass(frozen=True)
class PairedDelta:
    """Point values and percentile intervals; NaN where undefined. B = benchmarks, k = concepts."""

    chi_a: FloatArray  # B × k
    chi_b: FloatArray
    chi_delta: FloatArray
    chi_low: FloatArray
    chi_high: FloatArray
    x_a: FloatArray  # k
    x_b: FloatArray
    x_delta: FloatArray
    x_low: FloatArray
    x_high: FloatArray
    rel_delta: FloatArray  # k: ΔX_model beyond the change of the benchmarks' mean score (see module doc)
    rel_low: FloatArray
    rel_high: FloatArray
    mean_delta: FloatArray  # B: Δ of each benchmark's mean score over the paired rows
    resamples: int
    confidence: float


def column_quantiles(values: FloatArray, qs: tuple[float, ...]) -> FloatArray:
    """np.nanquantile(values, qs, axis=0) (linear interpolation) for all columns at once.

    NaNs sort last, so each column's defined values are its first `count` entries; columns with no defined
    value give NaN. (np.nanquantile falls back to one Python call per column when NaNs are present.)
    """
    ordered = np.sort(values, axis=0)
    count = (~np.isnan(values)).sum(axis=0)
    out = np.full((len(qs), values.shape[1]), np.nan)
    ok = count > 0
    if not ok.any():
        return out
    cols = np.flatnonzero(ok)
    last = count[ok] - 1
    for j, q in enumerate(qs):
        pos = q * last
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, last)
        frac = pos - lo
        v_lo, v_hi = ordered[lo, cols], ordered[hi, cols]
        out[j, ok] = v_lo + (v_hi - v_lo) * frac
    return out


def resample_weights(n: int, resamples: int, rng: np.random.Generator) -> FloatArray:
    """(resamples + 1) × n: row 0 is the sample itself (all ones), then multinomial bootstrap counts."""
    weights = np.empty((resamples + 1, n))
    weights[0] = 1.0
    if resamples and n:
        # n draws with replacement per resample, counted per row: multinomial(n, 1/n) counts, via one bincount
        drawn = rng.integers(0, n, size=(resamples, n)) + (np.arange(resamples) * n)[:, None]
        weights[1:] = np.bincount(drawn.ravel(), minlength=resamples * n).reshape(resamples, n)
    return weights


def resampled_chi(acts_t: sparse.csr_matrix, scores: FloatArray, weights: FloatArray) -> FloatArray:
    """χ_model of one benchmark under every weight vector: (R+1) × k. acts_t is k × n (s̃ transposed).

    Σ_i w_ri m_i s̃_ci and Σ_i w_ri s̃_ci are two sparse × dense products; `chi_model` divides them.
    """
    weighted = (acts_t @ (weights * scores).T).T
    total = (acts_t @ weights.T).T
    return chi_model(np.asarray(weighted), np.asarray(total))


class _Weights:
    """Each benchmark's resample counts, drawn from its own seed: kept when small, else redrawn per chunk
    (the same seed gives the same counts, so every concept chunk sees the same resamples)."""

    def __init__(self, sample: PairedSample, resamples: int, seed: int, max_cells: int) -> None:
        self.rows = [np.flatnonzero(sample.codes == b) for b in range(sample.n_benchmarks)]
        self.seeds = np.random.SeedSequence(seed).spawn(sample.n_benchmarks)
        self.resamples = resamples
        keep = (resamples + 1) * sample.codes.size <= max_cells
        self.kept = [self._draw(b) for b in range(sample.n_benchmarks)] if keep else None

    def _draw(self, b: int) -> FloatArray:
        return resample_weights(self.rows[b].size, self.resamples, np.random.default_rng(self.seeds[b]))

    def __getitem__(self, b: int) -> FloatArray:
        return self.kept[b] if self.kept is not None else self._draw(b)


def mean_deltas(sample: PairedSample, weights: _Weights) -> FloatArray:
    """Δμ_b = resampled mean score of B minus that of A, per benchmark: B × (R+1)."""
    out = np.empty((sample.n_benchmarks, weights.resamples + 1))
    for b, rows in enumerate(weights.rows):
        w = weights[b]
        out[b] = (w @ (sample.scores_b[rows] - sample.scores_a[rows])) / w.sum(axis=1)
    return out


def _chunk(sample: PairedSample, cols: slice, weights: _Weights) -> tuple[FloatArray, FloatArray]:
    """Resampled χ_model of both runs for the concept columns `cols`: two B × (R+1) × k arrays."""
    shape = (sample.n_benchmarks, weights.resamples + 1, cols.stop - cols.start)
    chi_a, chi_b = np.empty(shape), np.empty(shape)  # every benchmark has rows: all filled below
    for b, rows in enumerate(weights.rows):
        w = weights[b]
        for acts, scores, out in ((sample.acts_a, sample.scores_a, chi_a), (sample.acts_b, sample.scores_b, chi_b)):
            out[b] = resampled_chi(acts[rows][:, cols].T.tocsr(), scores[rows], w)
    return chi_a, chi_b


def paired_bootstrap(
    sample: PairedSample, *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95, max_cells: int = MAX_CELLS
) -> PairedDelta:
    """Δ = B − A of χ_model per benchmark and X_model per concept, with paired percentile intervals."""
    if resamples < 0:
        raise ValueError(f"resamples must be ≥ 0, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    k, n_bench = sample.n_concepts, sample.n_benchmarks
    weights = _Weights(sample, resamples, seed, max_cells)
    alpha = (1.0 - confidence) / 2
    out: dict[str, FloatArray] = {
        name: np.full((n_bench, k), np.nan) for name in ("chi_a", "chi_b", "chi_low", "chi_high")
    }
    out |= {name: np.full(k, np.nan) for name in ("x_a", "x_b", "x_low", "x_high", "rel", "rel_low", "rel_high")}
    mu = mean_deltas(sample, weights)[:, :, None]  # B × (R+1) × 1
    step = max(1, max_cells // ((resamples + 1) * n_bench))
    for start in range(0, k, step):
        cols = slice(start, min(k, start + step))
        chi_a, chi_b = _chunk(sample, cols, weights)
        out["chi_a"][:, cols], out["chi_b"][:, cols] = chi_a[:, 0], chi_b[:, 0]
        x_a, x_b = nanmean_rows(chi_a), nanmean_rows(chi_b)  # X_model: mean of the defined χ over benchmarks
        rel = nanmean_rows(chi_b - chi_a - mu)
        out["x_a"][cols], out["x_b"][cols], out["rel"][cols] = x_a[0], x_b[0], rel[0]
        if resamples:
            out["x_low"][cols], out["x_high"][cols] = column_quantiles(x_b[1:] - x_a[1:], (alpha, 1 - alpha))
            for b in range(n_bench):
                if n_bench == 1:  # X_model is χ_model of the one benchmark: same interval
                    out["chi_low"][b, cols], out["chi_high"][b, cols] = out["x_low"][cols], out["x_high"][cols]
                    continue
                out["chi_low"][b, cols], out["chi_high"][b, cols] = column_quantiles(
                    chi_b[b, 1:] - chi_a[b, 1:], (alpha, 1 - alpha)
                )
            out["rel_low"][cols], out["rel_high"][cols] = column_quantiles(rel[1:], (alpha, 1 - alpha))
    return PairedDelta(
        chi_a=out["chi_a"],
        chi_b=out["chi_b"],
        chi_delta=out["chi_b"] - out["chi_a"],
        chi_low=out["chi_low"],
        chi_high=out["chi_high"],
        x_a=out["x_a"],
        x_b=out["x_b"],
        x_delta=out["x_b"] - out["x_a"],
        x_low=out["x_low"],
        x_high=out["x_high"],
        rel_delta=out["rel"],
        rel_low=out["rel_low"],
        rel_high=out["rel_high"],
        mean_delta=mu[:, 0, 0],
        resamples=resamples,
        confidence=confidence,
    )
