"""The firing rule on a worked example: a column's threshold is 10% of its own p99 of non-zero s̃ (numpy's
linear percentile), a one-entry column fires on itself, and `firing` keeps exactly the entries at or above."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from cg_ray.metrics.firing import firing


def test_firing_keeps_the_entries_at_or_above_each_columns_threshold() -> None:
    m = sparse.csc_matrix(np.array([[1.0, 0.0], [10.0, 2.0], [0.05, 0.0], [0.5, 0.0]]))
    thresholds, fires = firing(m)
    assert thresholds[1] == 0.2  # one entry: 10% of itself
    # col 0's p99 of (0.05, 0.5, 1, 10) is 1 + 0.97 × 9 = 9.73: it fires at 0.973, so 0.5 and 0.05 are tails
    assert abs(thresholds[0] - 0.1 * (1 + 0.97 * 9)) < 1e-12 and fires[:, 0].nonzero()[0].tolist() == [0, 1]
