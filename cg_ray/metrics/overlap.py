"""How benchmarks relate: Jaccard overlap of active concepts, correlation of χ_model across benchmarks."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

MIN_COMMON_FOR_CORRELATION = 3


def jaccard_matrix(chi_bench: FloatArray) -> FloatArray:
    """J[a,b] = |A∩B| / |A∪B| over the active-concept sets (χ_bench > 0) of benchmarks a and b.

    Two benchmarks with no active concept at all have an empty union: J is defined as 0 there
    (1 on the diagonal).
    """
    active = (chi_bench > 0).astype(np.float64)
    inter = active @ active.T
    sizes = active.sum(axis=1)
    union = sizes[:, None] + sizes[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(union > 0, inter / union, 0.0)
    np.fill_diagonal(out, 1.0)
    return out


def correlation_matrix(chi_model: FloatArray) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """Pearson correlation of χ_model between benchmark pairs over the concepts defined in both.

    Returns (r, n_common); r is NaN where fewer than MIN_COMMON_FOR_CORRELATION concepts are shared or
    one side is constant.
    """
    n = chi_model.shape[0]
    defined = ~np.isnan(chi_model)
    r = np.full((n, n), np.nan)
    n_common = np.zeros((n, n), dtype=np.int64)
    for a in range(n):
        for b in range(a, n):
            both = defined[a] & defined[b]
            k = int(both.sum())
            n_common[a, b] = n_common[b, a] = k
            if k < MIN_COMMON_FOR_CORRELATION:
                continue
            x = chi_model[a, both] - chi_model[a, both].mean()
            y = chi_model[b, both] - chi_model[b, both].mean()
            denom = np.sqrt((x * x).sum() * (y * y).sum())
            if denom > 0:
                r[a, b] = r[b, a] = float(np.clip((x * y).sum() / denom, -1.0, 1.0))
    return r, n_common
