"""Request and response bodies of the REST API: what `/docs` shows.

Result views that mirror a run directory's tables declare the columns clients rely on and keep any others
(`extra="allow"`), so a column added to concepts.parquet reaches clients without an API change.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

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
    probe: dict[str, Any] | None = Field(None, description="the run's probe (`cg-ray probe`): gaps tested on new items")
    scope: dict[str, Any] | None = Field(
        None, description="the run's scope (`cg-ray scope`, POST …/scope): as GET /v1/analyses/{id}/scope shows it"
    )


class ProbeStatus(BaseModel):
    """GET /v1/analyses/{id}/probe: the analysis' probe started over REST (cg_ray.serve.probes)."""

    status: Literal["pending", "running", "succeeded", "failed"]
    started_at: str | None
    finished_at: str | None
    settings: dict[str, Any] = Field(description="the probe's settings as validated (cg_ray.probe.config)")
    progress: list[str] = Field(description="the last lines the probe printed: its plan, then a line per gap and step")
    error: str | None = Field(description="why it failed (its last error line)")
    decision: str | None = Field(description="the decision rule the verdicts follow (once succeeded)")
    results: list[dict[str, Any]] | None = Field(description="one row per gap probed: probe/results.parquet")


# ---- /v1/analyses/{id}/scope


class ScopeJudgeRequest(BaseModel):
    """An LLM judge of the gaps' scope (cg_ray.scope.judge.ScopeJudge), as a request may name it: its endpoint
    and key variable only from the service's `scope:` settings, its limits the service's."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=200, description="the model the endpoint serves")
    endpoint: str = Field(
        min_length=1,
        max_length=2000,
        description="OpenAI-compatible base URL under one of the service's scope.endpoints",
    )
    api_key_env: str | None = Field(
        None, max_length=200, description="the key's environment variable, one of scope.key_envs (never the key)"
    )
    descriptions: dict[str, str] = Field(
        default_factory=dict, description="benchmark -> what it intends to test, for every benchmark scoped"
    )
    batch: int = Field(5, ge=1, le=20, description="concepts per judge request")
    include_missing: bool = Field(False, description="also judge concepts in the reference's use never fired on")

    @field_validator("descriptions")
    @classmethod
    def _short(cls, value: dict[str, str]) -> dict[str, str]:
        for bench, text in value.items():
            if len(text) > 4000:
                raise ValueError(f"the description of {bench!r} is over 4000 characters")
        return value


class ScopeRequestBody(BaseModel):
    """POST /v1/analyses/{id}/scope: `cg-ray scope` of the analysis' run against sibling benchmarks."""

    model_config = ConfigDict(extra="forbid")

    benchmarks: list[str] = Field(
        default_factory=list, max_length=1000, description="benchmarks to scope; none: every one not a reference"
    )
    references: list[str] = Field(
        default_factory=list, max_length=1000, description="sibling benchmarks of the analysis, pooled as reference"
    )
    suite: bool = Field(False, description="also the run's benchmarks pooled as one, '(suite)'")
    method: Literal["excess", "ratio"] | None = Field(None, description="concept gaps: excess (default) or ratio")
    min_share: float | None = Field(None, description="in use: pooled share (excess) at least this; default 0.02")
    margin: float | None = Field(None, description="excess: a gap when p_R − p_b is confidently above this; 0.02")
    ratio: float | None = Field(None, description="ratio: a gap when p_b is below ratio × p_R; default 0.5")
    density: float | None = Field(
        None, description="rows: uncovered where the benchmark's density is at most this × the reference's; 0.25"
    )
    fdr: float | None = Field(None, description="Benjamini–Hochberg level over the concepts tested; default 0.10")
    judge: ScopeJudgeRequest | None = None
    reference_rows: Any = Field(
        None,
        description="refused: rows files of real use are server paths; upload them as a benchmark of the analysis "
        "and name it in `references`",
    )

    @field_validator("reference_rows")
    @classmethod
    def _no_paths(cls, value: Any) -> None:
        if value is not None:
            raise ValueError(
                "rows files are not accepted over REST (they would be server paths): upload the rows of real "
                "use as a benchmark of the analysis and name it in `references`"
            )


class ScopeGap(_Open):
    """One in-scope gap as the report shows it: in words first, then its evidence."""

    concept_id: int
    label: str
    evidence: str = Field(description="both shares with their intervals and the ratio, in words")
    q_value: float | None
    missing: bool = Field(description="the benchmark fires it on no row")
    judge: str | None = Field(None, description="the judge's verdict and reason, where one was asked")
    example: str | None = Field(None, description="a reference text where the concept fires most")


class ScopeJudgeCounts(_Open):
    """A benchmark's judge: its description and the verdicts' counts (cg_ray.scope.judge.JudgeCounts)."""

    description: str
    asked: int
    in_scope: int
    out_of_scope: int
    unreadable: int
    requests: int


class ScopeBenchmark(_Open):
    """One (benchmark, reference) pair of scope/summary.json with its gaps shown."""

    benchmark: str
    reference: str
    rows: int
    reference_rows: int
    in_reference_use: int = Field(description="concepts the reference confidently uses")
    gaps: int = Field(description="of those, confidently tested less here")
    gaps_missing: int = Field(description="gaps the benchmark fires on no row")
    missing_share: float | None
    never_fires_share: float | None
    missing_bound: float | None
    rule: dict[str, Any] | None = None
    judge: ScopeJudgeCounts | None = None
    gaps_shown: list[ScopeGap] = Field(description="the most confident gaps (all are in scope/gaps.parquet)")


class ScopeSuite(_Open):
    benchmarks: list[str]
    d_sae: int
    missing_share: float | None
    missing_concepts: int
    live_concepts: int
    over_represented: list[dict[str, Any]]


class ScopeView(_Open):
    """GET /v1/analyses/{id}/scope: the run's scope as the report and explorer show it
    (cg_ray.report.scope.scope_view)."""

    decision: str = Field(description="the rule, in words")
    suite: ScopeSuite
    benchmarks: list[ScopeBenchmark]


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
