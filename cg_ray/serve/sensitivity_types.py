"""Request and response bodies of POST / GET /v1/analyses/{id}/sensitivity (cg_ray.serve.sensitivities): whether
an analysis' findings hold when other readers (SAEs) read its rows. The other routes' bodies are in
`api_types.py`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cg_ray.serve.api_types import _Open


class SensitivityRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    readers: list[str] | None = Field(
        None,
        min_length=1,
        max_length=20,
        description="other readers to re-read the rows with (shipped names among the service's "
        "sensitivity.readers); none: every one the service allows but the run's own",
    )
    fresh: bool = Field(False, description="re-read every reader, even one already read for this analysis")


class SensitivityUnderReader(_Open):
    """One finding under one other reader: findings.parquet's row, with its figures in words. The other reader
    reads the same rows with the same scores and splits: robustness to the reader, not replication."""

    reader: str
    status: str = Field(description="found | partly | not found (the summary's `rule`)")
    mark: str = Field(description="✓ found by that reader, ~ partly, ✗ not found (on the same rows)")
    match: str | None = Field(description="the other reader's confirmed finding overlapping its rows most")
    jaccard: float | None = Field(description="Jaccard of the two findings' flagged rows")
    jaccard_by_chance: float | None = Field(
        None, description="the Jaccard a random set of the match's size would have (hypergeometric expectation)"
    )
    covered: float | None = Field(description="the share of its rows the match flags")
    best_q: float | None = Field(
        None,
        description="the smallest q of the other reader's candidates, confirmed or not, flagging rows like these "
        "(Jaccard or coverage >= 0.5): a near miss of a finding not found",
    )
    best_q_finding: str | None = Field(None, description="that candidate (mode:RANK | concept:ID)")
    overlap: str = Field(description="the match, its Jaccard beside chance's, and coverage, in words")
    near: str = Field(description="the best candidate for rows like these and its q, in words")


class SensitivityFinding(_Open):
    """A confirmed finding of the run (failure mode, slice, concept) and its status under each other reader."""

    kind: str
    finding: str = Field(description="mode:RANK | slice:RANK | concept:ID")
    description: str
    n_rows: int
    own_estimate: float | None = Field(
        description="the run's own estimate of its rows, on the halves that chose it: a figure, not a verdict"
    )
    fresh_rows: str | None = Field(
        description="its standing verdict on new items (cg-ray probe: confirmed | refuted | unsettled | too_few), "
        "the replication; null when not probed"
    )
    other_readers: str | None = Field(description="'l20-seed7 ✓, l13 ~' (the readers in the summary's order)")
    readers: list[SensitivityUnderReader]


class SensitivityView(_Open):
    """The run's sensitivity/ as the report and explorer show it (cg_ray.report.sensitivity.sensitivity_view)."""

    reader: dict[str, Any] = Field(description="the run's own reader: name, sae, layer, d_sae")
    rule: str = Field(description="what found / partly / not found mean, in words")
    readers: list[dict[str, Any]] = Field(
        description="per other reader: name, layer, d_sae, rows, seconds, statuses (failure modes and concepts), "
        "slices_text (slices, counted apart)"
    )
    pairs: list[dict[str, Any]] = Field(
        description="per (run's reader, other reader): latents shared, rank correlations, top rows' overlap"
    )
    findings: list[SensitivityFinding] = Field(description="the failure modes and concepts compared (first 60)")
    slices: list[SensitivityFinding] = Field(
        default_factory=list, description="the slices compared: metadata rules, found by every reader"
    )
    fresh: str = Field("", description="how many findings were confirmed on fresh rows (cg-ray probe), in words")
    total: int = Field(description="failure modes and concepts compared (the first 60 are listed)")


class SensitivityStatus(BaseModel):
    """GET /v1/analyses/{id}/sensitivity: the re-reading started over REST, and the run's sensitivity/."""

    status: Literal["pending", "running", "succeeded", "failed"]
    started_at: str | None
    finished_at: str | None
    settings: dict[str, Any] = Field(description="readers and fresh, as started")
    progress: list[str] = Field(description="its last lines: the plan (rows × readers, time), a line per reader")
    error: str | None = Field(description="why it failed")
    view: SensitivityView | None = Field(
        description="the run's sensitivity/ as last written (an earlier one's while a new one runs)"
    )
