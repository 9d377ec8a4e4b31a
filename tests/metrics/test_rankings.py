"""Rankings: ties in X_model go to the concept with more support, then to the lower id."""

from __future__ import annotations

import numpy as np

from cg_ray.config import MetricsConfig
from cg_ray.metrics.compute import compute_metrics
from cg_ray.metrics.rankings import rank_concepts

from .test_formulas import accumulate


def test_ties_at_zero_put_the_best_supported_concept_first() -> None:
    # 6 failed rows, one benchmark. Concepts 0, 1, 2 are active only in failed rows (X_model 0) in 2, 5 and
    # 3 rows; concept 3 is active in every row, including a passed one.
    dense = np.zeros((7, 4))
    dense[:2, 0] = 1.0
    dense[:5, 1] = 1.0
    dense[:3, 2] = 1.0
    dense[:, 3] = 1.0
    scores = np.array([0.0] * 6 + [1.0])
    result = compute_metrics(accumulate(dense, np.zeros(7, dtype=int), scores, ["a"]), MetricsConfig(min_rows=1))
    np.testing.assert_allclose(result.X_model[:3], 0.0)
    ranked = rank_concepts(result)
    assert ranked.worst_model == [1, 2, 0, 3]  # 5, 3, 2 rows at X_model 0, then the one above 0
    assert ranked.best_model == [3, 1, 2, 0]


def test_equal_value_and_support_fall_back_to_the_id() -> None:
    dense = np.zeros((4, 3))
    dense[:2, 2] = 1.0
    dense[:2, 0] = 1.0
    dense[2:, 1] = 1.0
    scores = np.array([0.0, 0.0, 1.0, 1.0])
    result = compute_metrics(accumulate(dense, np.zeros(4, dtype=int), scores, ["a"]), MetricsConfig(min_rows=1))
    assert rank_concepts(result).worst_model == [0, 2, 1]
