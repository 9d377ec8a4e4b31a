"""One entry of diff.json's top lists (`cg-ray diff`): what the writer builds (cg_ray.compare.outputs) and
what GET /v1/diff answers (the service's DiffView lists these), one definition for the file and the API.
None: undefined (a non-finite number)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class DiffInterval(BaseModel):
    delta: float | None
    low: float | None
    high: float | None


class DiffBenchmark(BaseModel):
    benchmark: str
    n_paired_active: int
    delta_chi_model: float | None
    low: float | None
    high: float | None


class HeldOutVerdict(BaseModel):
    """A change judged on rows that did not choose it (cg_ray.compare.heldout_diff): the change of its rows
    beyond the other rows of their benchmark, held out, with the interval of the decision rule."""

    direction: str = Field(description="regressed | improved")
    estimate: float | None
    low: float | None
    high: float | None
    q_value: float
    confirmed: bool = Field(description="q ≤ fdr: the one decision rule; the interval then excludes 0")
    splits_selected: int
    n_heldout: int
    mde: float | None = Field(description="the change this rule would confirm with 80% power")
    same_rows_as: int | None = Field(
        None, description="an earlier confirmed finding whose firing rows this one shares (Jaccard ≥ 0.5): one effect"
    )


class DiffConcept(BaseModel):
    concept_id: int
    label: str | None
    description: str | None
    X_model_a: float | None
    X_model_b: float | None
    delta_X_model: float | None
    low: float | None
    high: float | None
    relative: DiffInterval
    n_paired_active: int
    per_benchmark: list[DiffBenchmark]
    examples: dict[str, list[dict[str, Any]]] = Field(
        description="right_in_a_wrong_in_b / wrong_in_a_right_in_b: the rows that flipped, most salient first"
    )
    heldout: HeldOutVerdict | None = Field(None, description="its held-out verdict, where a split chose it")
