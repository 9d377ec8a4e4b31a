"""The firing rule: when a concept *fires* on a row. One definition, used by failure modes (their rows,
overlaps and terms), the probe's reader check, the run diff and a benchmark's scope (`cg_ray.scope`).

A concept fires on a row when its s̃ reaches `FIRING_SHARE` of its own `FIRING_QUANTILE`th percentile of
non-zero activations over the rows it is judged on. An SAE leaves weak tails on unrelated text: on 5,144
real prompts the reader's dollar-amount concept is non-zero on 624 rows, 399 of them with a dollar amount,
but reaches 10% of its p99 on 420 rows, 399 of them (docs/failure_modes.md). The threshold uses activations
only, never scores, so every split of a run may share it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import sparse

FloatArray = npt.NDArray[np.float64]

FIRING_SHARE = 0.1
FIRING_QUANTILE = 99.0


def fires(acts: npt.NDArray[np.floating], threshold: npt.NDArray[np.floating] | float) -> npt.NDArray[np.bool_]:
    """Whether each activation fires: active and at or above its concept's threshold. The one comparison every
    user of the rule makes (failure modes, the mode explanations, the probe's reader check)."""
    acts = np.asarray(acts)
    out: npt.NDArray[np.bool_] = (acts > 0) & (acts >= threshold)
    return out


def firing_threshold(acts: npt.NDArray[np.floating]) -> float:
    """The activation at which a concept fires, from its activations over the rows (zeros ignored; 0 for a
    concept never active: then any activation counts)."""
    acts = np.asarray(acts)
    active = acts[acts > 0]
    return float(FIRING_SHARE * np.percentile(active, FIRING_QUANTILE)) if active.size else 0.0


def column_thresholds(m: sparse.csc_matrix) -> FloatArray:
    """`firing_threshold` of each column of a rows × concepts matrix of s̃."""
    return np.array([firing_threshold(m.data[lo:hi]) for lo, hi in zip(m.indptr[:-1], m.indptr[1:], strict=True)])


def firing(m: sparse.csc_matrix) -> tuple[FloatArray, sparse.csc_matrix]:
    """Each column's `firing_threshold` and the matrix of its entries at or above it (the rows where the concept
    fires, with their s̃)."""
    threshold = column_thresholds(m)
    col = np.repeat(np.arange(m.shape[1]), np.diff(m.indptr))
    keep = fires(m.data, threshold[col])
    indptr = np.concatenate([[0], np.cumsum(np.bincount(col[keep], minlength=m.shape[1]))])
    return threshold, sparse.csc_matrix((m.data[keep], m.indices[keep], indptr), shape=m.shape)
