"""Request and response bodies of the REST API: what `/docs` shows.

Result views that mirror a run directory's tables declare the columns clients rely on and keep any others
(`extra="allow"`), so a column added to concepts.parquet reaches clients without an API change.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cg_ray.benchmarks.sources import FieldMapping
from cg_ray.config import MetricsConfig, TextMode
from cg_ray.serve.redact import MAX_CHARS, scrub_paths

Item = TypeVar("Item")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


# ---- requests


class JsonUpload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field("rows", max_length=200)
    rows: list[dict[str, Any]]
    mapping: FieldMapping | None = Field(
        None,
        description="which field holds each part of a row; unset parts are looked for under their own names "
        "(id, benchmark, prompt, response, reference, score)",
    )


class AnalysisRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upload_ids: list[str] = Field(min_length=1)
    mode: Literal["precomputed", "generate", "arena"] = "precomputed"
    text: TextMode = Field(
        "prompt_response", description="what the reader reads; `both` is a deprecated alias of prompt_response"
    )
    scorer: str | None = Field(None, description="generate mode: how answers are scored (default exact)")
    model: str | None = Field(None, description="name of the evaluated model, for the record")
    metrics: MetricsConfig = Field(default_factory=MetricsConfig, description="options of the CG metrics")
    models: list[str] | None = Field(None, description="arena: models of interest (default: all with min_battles)")
    min_battles: int | None = Field(None, ge=1, description="arena: models with at least this many battles")
    max_battles_per_model: int | None = Field(None, ge=1, description="arena: read only the first N battles")


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    texts: list[str] = Field(min_length=1)
    scores: list[float | None] | None = None
    top_k: int = Field(5, ge=1, le=50)


# ---- ops


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    d_sae: int | None = None
    error: str | None = None


# ---- uploads and analyses


class UploadView(BaseModel):
    model_config = ConfigDict(from_attributes=True)  # built from the Upload row

    id: str
    name: str
    n_rows: int
    benchmarks: list[str] = Field(description="benchmark names (for battles: the models)")
    fields: dict[str, Any] = Field(description="detected fields and the mapping used (or the battles summary)")
    has_scores: bool
    created_at: datetime


class AnalysisView(BaseModel):
    model_config = ConfigDict(from_attributes=True)  # built from the Analysis row

    id: str
    upload_ids: list[str]
    mode: str
    status: str
    progress: float
    message: str | None
    error: str | None
    job_id: str | None
    created_at: datetime
    updated_at: datetime

    @field_validator("progress")
    @classmethod
    def _rounded(cls, value: float) -> float:
        return round(value, 4)

    @field_validator("message", "error")
    @classmethod
    def _no_server_paths(cls, value: str | None) -> str | None:
        return None if value is None else scrub_paths(value)[:MAX_CHARS]


class Deleted(BaseModel):
    id: str
    deleted: bool = True


# ---- results


class ConceptRow(_Open):
    """One row of concepts.parquet (non-finite numbers as null)."""

    concept_id: int
    label: str | None = None


class Page(BaseModel, Generic[Item]):
    """A page of a sorted list: `total` items in all, `limit` of them from `offset`."""

    total: int
    offset: int
    limit: int
    items: list[Item]


class ConceptPage(Page[ConceptRow]):
    """A page of concepts.parquet."""


class Example(_Open):
    row_id: str
    score: float | None = None


class ConceptDescription(_Open):
    """One row of descriptions.parquet (`cg-ray describe`): description, source, enrichment, examples…"""

    concept_id: int
    description: str | None


class ConceptDetail(ConceptRow):
    benchmarks: list[dict[str, Any]] = Field(description="the concept's rows of benchmark_concepts.parquet")
    best_examples: list[Example]
    worst_examples: list[Example]
    readable: ConceptDescription | None = Field(None, description="its row of descriptions.parquet, if described")


class Verdict(BaseModel):
    """How a finding fared held out (docs/findings.md): a rule chosen on one half of each of R repeated grouped
    splits and tested, as the same rule, on the other half; one decision rule, `confirmed` ⇔ q_value ≤ the
    run's fdr. Null throughout for a run made before these checks."""

    p_value: float | None = Field(None, description="held-out p-value: the splits' aggregated (twice their median)")
    q_value: float | None = Field(
        None, description="the splits' within-split Benjamini-Hochberg q-values aggregated (twice their median)"
    )
    confirmed: bool | None = Field(
        None, description="q_value ≤ the run's fdr (the one decision rule); false: a candidate, see mde"
    )
    splits_selected: int | None = Field(None, description="how many of the R splits chose it")
    n_heldout: int | None = Field(None, description="held-out scored rows it was tested on (the median split)")
    n_clusters: int | None = Field(None, description="row groups among them (the interval's clusters)")
    mde: float | None = Field(
        None,
        description="minimum detectable effect at 80% power: the effect it would be confirmed at, in the units "
        "of its estimate (failure modes: a residual; slices and concepts: the contrast); null when no split "
        "could test it",
    )
    measured: str | None = Field(
        None, description="in words: 'tested on 412 held-out rows (380 groups), chosen by 9 of 10 splits'"
    )
    power: str | None = Field(
        None, description="in words, for a candidate: the smallest effect this run could confirm ('' if confirmed)"
    )


class ProfileEntry(Verdict):
    """One entry of a weakness profile (see docs/usage.md, run directory: weaknesses.parquet)."""

    rank: int
    concept_id: int
    label: str | None
    description: str | None
    X_model: float | None
    X_model_low: float | None
    X_model_high: float | None
    adjusted_gap: float | None
    adjusted_gap_low: float | None
    adjusted_gap_high: float | None
    n_rows: int
    n_eff: float | None
    n_benchmarks: int
    group: int
    members: list[int]
    metadata_enrichment: list[str]
    example_row_ids: list[str]
    residual: float | None = Field(None, description="mean score − cell mean over its rows (s̃-weighted)")
    residual_low: float | None = None
    residual_high: float | None = None
    adjusted_for: list[str] | None = Field(None, description="the row fields whose cell means were subtracted")
    terms: list[str] | None = Field(None, description="distinctive terms of its rows against the suite")
    residual_heldout: float | None = Field(
        None, description="cross-fitted residual (only concepts that were candidates)"
    )
    residual_heldout_low: float | None = None
    residual_heldout_high: float | None = None


class SliceEntry(Verdict):
    """One row of slices.parquet: a conjunction of metadata values whose mean score is low; confirmed ones
    first. mean_score / low / high are held out."""

    rank: int
    slice: str
    conditions: dict[str, str]
    n_rows: int
    mean_score: float | None
    low: float | None
    high: float | None
    mean_in_sample: float | None = Field(None, description="mean score over every scored row of the slice")
    suite_mean: float | None = Field(
        None, description="what the held-out mean is compared with: the same split's held-out rows outside the slice"
    )
    example_row_ids: list[str]


class FailureModeEntry(Verdict):
    """One row of failure_modes.parquet: concepts firing on the same rows that score below their cells;
    confirmed ones first. residual / residual_low / residual_high are held out."""

    rank: int
    description: str
    terms: list[str]
    term_shares: list[float] = Field([], description="share of the mode's rows holding each term")
    background_shares: list[float] = Field([], description="the same over its cells' rows where the mode is off")
    concept_ids: list[int]
    n_rows: int
    n_scored: int
    mean_score: float | None = Field(description="in sample: over every scored row of the mode")
    expected_score: float | None = Field(description="in sample: the mean of those rows' cell means")
    residual: float | None
    residual_low: float | None
    residual_high: float | None
    residual_in_sample: float | None = None
    adjusted_for: list[str]
    example_row_ids: list[str] = Field(description="a seeded random draw of its rows that score below their cell")
    examples: list[Example] = Field([], description="the example rows with benchmark, score and text")
    description_source: str | None = Field(None, description="terms, or llm after `cg-ray explain` won")
    detection_score: float | None = None


class MdeAtSize(BaseModel):
    n_rows: int = Field(description="a failure mode of this many rows")
    mde: float | None = Field(description="the residual it needs to be confirmed 80% of the time (a magnitude)")


class Crossfit(_Open):
    """summary.json's profile.beyond.crossfit: how findings were judged held out, and how many passed."""

    splits: int | None = Field(
        None,
        description="R: repeated grouped splits, each choosing findings on one half and testing them on the other "
        "(null: a run made before them, judged over `folds`)",
    )
    parts: int | None = Field(None, description="parts of grouped rows the splits are drawn from")
    fdr: float
    seed: int | None = None
    groups: dict[str, Any] = Field({}, description="how rows were grouped: rule, n_groups")
    decision: str | None = Field(None, description="the decision rule, in a sentence")
    interval: str | None = Field(None, description="what the intervals shown are, in a sentence")
    candidates: dict[str, int] = Field({}, description="family sizes: candidates tried, per kind")
    confirmed: dict[str, int] = Field(
        {}, description="confirmed, per kind (failure_modes, slices, slices_beyond_adjusted, concepts)"
    )
    mde_by_size: list[MdeAtSize] = Field([], description="the minimum detectable residual of a mode, by its size")
    skipped: str | None = Field(None, description="why nothing was judged (too few groups)")


class _ProfileBase(BaseModel):
    adjusted_for: list[str] | None = None
    rank_by: str | None
    duplicate_jaccard: float | None
    confidence: float | None
    total: int
    n_confirmed: int | None = Field(None, description="entries of the whole file confirmed held out")
    judged: str | None = Field(None, description="how findings were judged, in words ('' before held-out checks)")
    tried: str | None = Field(None, description="'61 candidates tried': the family's size, in words")
    crossfit: Crossfit | None = Field(None, description="null: a run made before held-out checks")


class ProfileResponse(_ProfileBase):
    kind: Literal["weaknesses", "strengths", "coverage_gaps"]
    items: list[ProfileEntry]


class SlicesResponse(_ProfileBase):
    kind: Literal["slices"]
    items: list[SliceEntry]


class FailureModesResponse(_ProfileBase):
    kind: Literal["failure_modes"]
    items: list[FailureModeEntry]


ProfileView: TypeAlias = ProfileResponse | SlicesResponse | FailureModesResponse
"""GET /v1/analyses/{id}/weaknesses: one profile, by its `kind`."""


class SummaryView(_Open):
    """summary.json of the analysis' run directory (see cg_ray.artifacts.contract.RunSummary)."""


class ThemesView(_Open):
    """themes.json written by `cg-ray describe`."""

    themes: list[dict[str, Any]]


class Distributions(BaseModel):
    X_bench: list[float]
    X_model: list[float]
    per_benchmark_chi_model: dict[str, list[float]]


class RunView(_Open):
    """GET /v1/analyses/{id}/view: every document the explorer draws for a run, as `cg-ray report` embeds them
    in report.html (cg_ray.report.documents.run_view)."""

    name: str
    summary: dict[str, Any]
    distributions: Distributions
    profiles: dict[str, dict[str, Any]] = Field(description="by kind: weaknesses, strengths, slices, failure_modes…")
    concepts: dict[str, list[Any]] = Field(description="the concept table, column by column")
    active_by_benchmark: dict[str, list[int]]
    details: dict[int, dict[str, Any]] = Field(description="the ranked concepts' examples and per-benchmark rows")
    descriptions: list[dict[str, Any]] | None
    themes: dict[str, Any] | None
    validation: dict[str, Any] | None
    robustness: dict[str, Any] | None


class SubsetCoverage(BaseModel):
    benchmarks: list[str]
    n_missing: int
    missing_pct: float
    X_bench_present: list[float]


class ArenaView(BaseModel):
    """An arena analysis as the explorer draws it: the document its report.html embeds (cg_ray.report.comparisons
    .arena_view), with each model's own analysis."""

    name: str
    config: dict[str, Any] = Field(description="ratings.json's settings (scale, anchor, bootstrap, confidence)")
    n_battles: int
    n_counted: int
    ratings: list[dict[str, Any]] = Field(description="ratings.json: one entry per model, best first")
    pairwise: list[dict[str, Any]] = Field(description="every ordered pair that met: observed score share, BT's")
    model_analyses: dict[str, str] = Field(description="model -> the analysis id of its own CG run")
    model_runs: dict[str, str] = Field(description="model -> its run's folder under the arena's models/")
    model_concepts: list[dict[str, Any]]
    pairs: list[dict[str, Any]]


# ---- /v1/score


class TopConcept(BaseModel):
    concept_id: int
    label: str | None
    activation: float


class ScoredRow(BaseModel):
    n_tokens: int
    top_concepts: list[TopConcept]


class CoveredConcept(BaseModel):
    concept_id: int
    label: str | None
    chi_bench: float


class WeakConcept(BaseModel):
    concept_id: int
    label: str | None
    chi_model: float
    chi_bench: float


class ScoreSummary(BaseModel):
    n_rows: int
    n_active_concepts: int
    most_covered: list[CoveredConcept]
    lowest_chi_model: list[WeakConcept] | None = Field(None, description="only when scores were given")


class ScoreResponse(BaseModel):
    rows: list[ScoredRow]
    summary: ScoreSummary
