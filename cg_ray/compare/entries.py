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
