"""The firing rule: each column's threshold is the one definition (`firing_threshold`) of its own entries,
including empty, single-entry and tied columns, and `firing` keeps exactly the entries at or above it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from cg_ray.metrics.firing import column_thresholds, firing, firing_threshold


def _per_column(m: sparse.csc_matrix) -> np.ndarray:
    return np.array([firing_threshold(m.data[lo:hi]) for lo, hi in zip(m.indptr[:-1], m.indptr[1:], strict=True)])


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(1, 60),
    cols=st.integers(1, 12),
    density=st.floats(0.0, 1.0),
    ties=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_column_thresholds_are_each_columns_own(rows: int, cols: int, density: float, ties: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    dense = rng.gamma(2.0, 0.5, size=(rows, cols)) * (rng.random((rows, cols)) < density)
    if ties:
        dense = np.round(dense, 1)  # repeated values, and some rounded to 0 (then not active)
    m = sparse.csc_matrix(dense)
    np.testing.assert_array_equal(column_thresholds(m), _per_column(m))


def test_firing_keeps_the_entries_at_or_above_each_columns_threshold() -> None:
    m = sparse.csc_matrix(np.array([[1.0, 0.0], [10.0, 2.0], [0.05, 0.0], [0.5, 0.0]]))
    thresholds, fires = firing(m)
    assert thresholds[1] == 0.2  # one entry: 10% of itself
    # col 0's p99 of (0.05, 0.5, 1, 10) is 1 + 0.97 × 9 = 9.73: it fires at 0.973, so 0.5 and 0.05 are tails
    assert abs(thresholds[0] - 0.1 * (1 + 0.97 * 9)) < 1e-12 and fires[:, 0].nonzero()[0].tolist() == [0, 1]
