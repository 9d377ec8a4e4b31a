"""/v1/score's answer, built by serve.score_summary from the metrics package's formulas."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cg_ray.serve.api_types import ScoreResponse
from cg_ray.serve.score_summary import score_batch


@dataclass
class Acts:
    concept_ids: np.ndarray
    concept_acts: np.ndarray
    n_tokens: int


def encoded() -> list[Acts]:
    # concept 3 is in every row, concept 5 only in the failed row, concept 7 only in the passed one
    return [
        Acts(np.array([3, 7]), np.array([0.8, 0.25], dtype=np.float32), 4),
        Acts(np.array([5, 3]), np.array([0.3, 0.9], dtype=np.float32), 2),
    ]


def test_rows_and_coverage_without_scores_leave_chi_model_out() -> None:
    out = score_batch(encoded(), None, top_k=2, d_sae=8, labels=None)
    assert isinstance(out, ScoreResponse)
    assert [c.concept_id for c in out.rows[1].top_concepts] == [3, 5]  # strongest first
    assert out.rows[0].n_tokens == 4 and out.summary.n_rows == 2 and out.summary.n_active_concepts == 3
    assert out.summary.most_covered[0].concept_id == 3  # the concept of every row covers the batch most
    assert "lowest_chi_model" not in out.model_dump(exclude_unset=True)["summary"]


def test_scores_rank_the_concept_of_the_failed_row_lowest() -> None:
    out = score_batch(encoded(), [1.0, 0.0], top_k=3, d_sae=8, labels=None)
    weak = out.summary.lowest_chi_model
    assert weak is not None and weak[0].concept_id == 5
    assert "lowest_chi_model" in out.model_dump(exclude_unset=True)["summary"]
