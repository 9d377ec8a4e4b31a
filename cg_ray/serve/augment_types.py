"""Response bodies of POST / GET /v1/analyses/{id}/augment (cg_ray.serve.augments): the job's status and,
once it succeeded, augment/summary.json of `cg-ray augment` (docs/augment.md). The other routes' bodies are in
`api_types.py` (kept apart: that module is at its size limit)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from cg_ray.serve.api_types import _Open

State = Literal["missing", "gap", "covered"]


class AugmentGap(_Open):
    """One targeted gap: what the writer wrote, what each check dropped, its state before → after."""

    gap_id: str = Field(description="concept:ID")
    label: str | None
    requests: int = Field(description="writer requests sent for it")
    malformed: int = Field(description="answers that were not an item")
    written: int
    format: int = Field(description="dropped: not in the benchmark's format")
    wrong_reference: int = Field(description="dropped: the reference checker disagreed")
    near_copy: int = Field(description="dropped: a near copy of the run's rows or of another item")
    reader: int = Field(description="dropped: the concept did not fire on it")
    kept: int
    state_before: State
    state_after: State
    bench_rows: list[int] = Field(description="the benchmark's rows on which it fires, before → after")
    bench_share: list[float] = Field(description="their share of the benchmark's rows, before → after")
    reference_share: float


class AugmentCoverage(_Open):
    """The benchmark's in-scope coverage before → after the kept items."""

    in_reference_use: int = Field(description="concepts in the reference's use")
    gaps: list[int] = Field(description="in-scope gaps, before → after")
    in_scope_coverage: list[float] = Field(description="share of the concepts in use it covers, before → after")
    rows: list[int] = Field(description="the benchmark's rows, before → after")
    items_added: int


class AugmentSummary(_Open):
    """augment/summary.json (cg_ray.artifacts.contract.AugmentSummary), less the run's server path."""

    benchmark: str
    reference: str
    config: dict[str, Any] = Field(description="the settings it ran with (the writer's key variable left out)")
    gaps: list[AugmentGap]
    coverage: AugmentCoverage
    over_represented: list[dict[str, Any]] = Field(description="concepts the items pushed into over-representation")
    requests: dict[str, Any] = Field(description="writer requests, malformed answers, items dropped per check")
    exports: list[str] = Field(description="files under augment/export/ (export/items.jsonl: the items to add)")


class AugmentStatus(BaseModel):
    """GET /v1/analyses/{id}/augment: the analysis' augment started over REST (cg_ray.serve.augments)."""

    status: Literal["pending", "running", "succeeded", "failed"]
    started_at: str | None
    finished_at: str | None
    settings: dict[str, Any] = Field(description="the augment's settings as validated (cg_ray.augment.config)")
    progress: list[str] = Field(description="its last lines: the plan, then a line per gap written, then the checks")
    error: str | None = Field(description="why it failed (its last error line)")
    summary: AugmentSummary | None = Field(description="once succeeded: coverage and each gap before → after")
