"""A fit / test split that keeps row groups whole (`cg-ray validate`): the groups of `folds.row_groups`, the
run's own, so the answers to one question or the rows of one template never sit on both sides."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cg_ray.arrays import IntArray


def group_strata(strata: npt.NDArray[np.integer], groups: npt.NDArray[np.integer]) -> IntArray:
    """The stratum of each group (code 0..G-1): the one holding most of its rows (ties: the lowest)."""
    strata, groups = np.asarray(strata, np.int64), np.asarray(groups, np.int64)
    if not groups.size:
        return np.zeros(0, np.int64)
    n_strata = int(strata.max()) + 1
    counts = np.bincount(groups * n_strata + strata, minlength=(int(groups.max()) + 1) * n_strata)
    out: IntArray = counts.reshape(-1, n_strata).argmax(axis=1).astype(np.int64)
    return out


def grouped_split(
    strata: npt.NDArray[np.integer], groups: npt.NDArray[np.integer], test_fraction: float, seed: int
) -> npt.NDArray[np.bool_]:
    """A test mask of whole groups, stratified by the groups' strata (`group_strata`), seeded: in each stratum
    the groups are shuffled and the test part is the prefix whose rows come closest to test_fraction × the
    stratum's rows (at least one group, never all). One row a group: round(test_fraction × n) rows."""
    groups = np.asarray(groups, np.int64)
    rng = np.random.default_rng(seed)
    sizes = np.bincount(groups) if groups.size else np.zeros(0, np.int64)
    home = group_strata(strata, groups)
    test_group = np.zeros(sizes.size, dtype=bool)
    for s in np.unique(home[sizes > 0]):
        mine = rng.permutation(np.flatnonzero((home == s) & (sizes > 0)))
        if mine.size < 2:
            continue  # one group cannot be split (`check_rows` refuses it)
        cum = np.cumsum(sizes[mine])
        n_test = int(np.argmin(np.abs(cum[:-1] - test_fraction * cum[-1]))) + 1
        test_group[mine[:n_test]] = True
    out: npt.NDArray[np.bool_] = test_group[groups]
    return out
