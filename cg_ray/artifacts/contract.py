"""The run-directory contract: the typed, versioned JSON documents of a run (where each file lives and how
a published run is updated: `cg_ray.artifacts.layout`). `RunSummary` = summary.json, `RunManifest` =
manifest.json, `ArenaSummary` = arena.json, `DiffSummary` = diff.json of `cg-ray diff`, `RobustnessReport` =
robustness.json, `RatingsSummary` = ratings.json, `HeadToHeadSummary` = head_to_head.json, `ExtractManifest`
= the manifest of `cg-ray extract`, `TrainingStats` = an SAE's training.json, `SaeEvaluation` = its eval.json,
`Themes` = themes.json of `cg-ray describe`, `ValidateReport` = validate.json. Names: `cg_ray.schemas`.

Every JSON document carries `format_version`. Readers accept documents without one (made before it
existed, same layout as version 1) and refuse a newer version with a clear error instead of misreading it.
Bump the version when a field changes meaning or goes away; adding a field needs no bump.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cg_ray.errors import InputError

FORMAT_VERSION = 1


class _Versioned(BaseModel):
    # Producers add fields over time (the `extra_summary` of each producer): kept, not refused.
    model_config = ConfigDict(extra="allow")

    version: ClassVar[int] = FORMAT_VERSION  # the newest layout this cg_ray reads and writes (per document)

    format_version: int = Field(FORMAT_VERSION, ge=0, description="layout version of this document")


class RunSummary(_Versioned):
    """summary.json: the suite's CG metrics, per-benchmark statistics, rankings and the settings used."""

    # 2: the run's failure modes and slices are held out with verdicts (failure_modes.parquet's residual and
    # slices.parquet's mean_score held out; `confirmed`, `q_value`…) and profile.beyond.crossfit says how.
    # 3: every residual column is named for what it holds, heldout_residual / in_sample_residual (+ _low /
    # _high); a table of an older run is read under the new names (cg_ray.artifacts.renamed); the judgement's
    # block is `judgement` (was `crossfit`) and records every confirmed concept; the profiles record each
    # concept's firing_threshold.
    version: ClassVar[int] = 3

    cg_ray_version: str
    d_sae: int
    n_rows: int
    n_scored_rows: int
    config: dict[str, Any]
    labels: dict[str, Any] | None
    suite: dict[str, Any]
    benchmarks: list[dict[str, Any]]
    rankings: dict[str, Any]


class RunManifest(_Versioned):
    """manifest.json: what produced the run (`cg-ray run`: config, versions, timings, counts) and the steps
    that updated it after it was published (`steps`: describe, explain, validate, robustness, report). A run
    made by `cg-ray metrics` gets a manifest with its first post-publish step: only `cg_ray_version` and
    `steps` then."""

    cg_ray_version: str
    config: dict[str, Any] = Field(default_factory=dict)
    counts: dict[str, Any] = Field(default_factory=dict)
    stages: dict[str, Any] = Field(default_factory=dict)
    steps: list[dict[str, Any]] = Field(default_factory=list)  # {step, at, files, ...} in the order they ran


class ArenaSummary(_Versioned):
    """arena.json: the arena job's config, its models (name -> folder under models/), row counts."""

    config: dict[str, Any]
    models: dict[str, str]
    row_counts: dict[str, Any]
    seconds: float


class DiffCounts(BaseModel):
    """How the two runs' rows paired (cg_ray.compare.runs) and how many concepts changed confidently."""

    model_config = ConfigDict(extra="allow")

    rows_a: int
    rows_b: int
    shared: int
    only_a: int
    only_b: int
    shared_unscored: int  # shared, but a score is missing in A or B
    paired: int
    benchmarks_only_a: list[str]
    benchmarks_only_b: list[str]
    per_benchmark: dict[str, dict[str, int]]  # benchmark -> rows_a, rows_b, shared, paired
    concepts_compared: int
    concepts_defined: int
    eligible: int
    confident_regressed: int
    confident_improved: int
    expected_by_chance_per_direction: float


class DiffSummary(_Versioned):
    """diff.json of `cg-ray diff`: the two runs, how their rows paired, and the confident changes."""

    kind: str
    runs: dict[str, dict[str, Any]]  # "a", "b": each run's path, benchmarks, mean paired score, reader
    config: dict[str, Any]
    counts: DiffCounts
    heldout: dict[str, Any] | None = None  # the findings judged held out (compare.heldout_diff); None: older
    top_regressed: list[dict[str, Any]]
    top_improved: list[dict[str, Any]]


class DiffModelsFindings(BaseModel):
    """What a diff-models analysis found: the two models, how their answers paired, and the hypotheses, each
    formed on one half of some splits of the prompts and judged on the other halves (confirmed or not). The
    artifact below and the service's view of the analysis both carry it."""

    models: dict[str, str]
    config: dict[str, Any]
    counts: dict[str, Any]
    # the splits, the decision rule, hypotheses formed and confirmed per direction; None in a format-1 document
    # (one half-split's `replication`), which still opens
    confirmation: dict[str, Any] | None = None
    hypotheses: list[dict[str, Any]]


class DiffModelsSummary(_Versioned, DiffModelsFindings):
    """hypotheses.json of `cg-ray diff-models`."""

    # 2: hypotheses judged over repeated splits (`confirmation`, each one's `heldout` and `confirmed`) instead
    # of one half-split (`replication`, `discovery` / `held_out`, `replicated`).
    version: ClassVar[int] = 2

    kind: str


class RobustnessReport(_Versioned):
    """robustness.json of `cg-ray robustness`: subsampling stds and the adversarial ablation's shifts."""

    rows_file: str
    config: dict[str, Any]
    robustness: dict[str, Any]
    subsampling: dict[str, Any]
    adversarial_ablation: dict[str, Any]


class ScopeSummary(_Versioned):
    """scope/summary.json of `cg-ray scope`: per benchmark its reference(s), the rule, the in-scope gaps, and
    the row-level view (`row_view`: the uncovered share of the reference and its themes)."""

    # 2: the default rule is the excess rule by cluster (`rule.method`; absent in version 1: the ratio rule), and
    # each benchmark entry has `row_view` (the row-level view).
    version: ClassVar[int] = 2

    run: str
    rule: dict[str, Any]  # cg_ray.scope.reference.ScopeRule
    decision: str  # the rule, in words
    benchmarks: list[dict[str, Any]]  # per benchmark and reference: rows, concepts in use, gaps, missing shares
    suite: dict[str, Any]  # the whole run's missing share and most over-represented concepts
    seconds: float


class SensitivitySummary(_Versioned):
    """sensitivity/summary.json of `cg-ray sensitivity`: the readers compared, the rule, counts."""

    # 2: statuses are found / partly / not found (was replicates / partly / not found), counted over the failure
    # modes and concepts (`statuses`) apart from the slices (`slices`); findings.parquet holds the run's
    # own_estimate instead of a re-judged effect, and jaccard_by_chance, best_q (cg_ray.artifacts.renamed reads
    # format 1's findings.parquet).
    version: ClassVar[int] = 2

    run: str
    reader: dict[str, Any]  # the run's own reader: name, sae, layer, d_sae
    # per other reader: name, sae, layer, d_sae, rows, seconds, resumed, statuses (failure modes and concepts),
    # slices (format 1: statuses counted slices too, under replicates / partly / not found)
    readers: list[dict[str, Any]]
    rule: str  # what found / partly / not found mean, in words
    seconds: float


class AugmentSummary(_Versioned):
    """augment/summary.json of `cg-ray augment`: the benchmark, its gaps targeted, what each check dropped,
    its in-scope coverage before → after the kept items, and what they pushed into over-representation."""

    run: str
    benchmark: str
    reference: str
    config: dict[str, Any]  # cg_ray.augment.config.AugmentConfig
    gaps: list[dict[str, Any]]  # per targeted concept: items written / kept, drops by reason, state before → after
    coverage: dict[str, Any]  # in-scope coverage before → after, concepts in the reference's use, gaps
    over_represented: list[dict[str, Any]]  # concepts χ_bench-over after the items but not before
    requests: dict[str, Any]  # writer and checker requests, malformed answers
    exports: list[str]  # files under augment/export/
    seconds: dict[str, float]


class ProbeSummary(_Versioned):
    """probe/summary.json of `cg-ray probe`: the plan, what each step kept and dropped, requests and time."""

    run: str
    config: dict[str, Any]
    gaps: list[dict[str, Any]]  # per gap: generator, pairs written / kept, drops by reason, verdict
    requests: dict[str, Any]  # writer, checker and model requests; tokens where known
    seconds: dict[str, float]  # per step
    decision: str  # the confirmation rule, in words
    exports: list[str]  # files under probe/export/
    # Every probe of the run, oldest first ({probe, at, gaps, pairs, seed}); each spends its own share of the
    # fdr and its verdicts are final (cg_ray.probe.history). Absent in summaries written before.
    probes: list[dict[str, Any]] = Field(default_factory=list)
    # Written by probes before the fdr was spent per probe (their joint re-judgement's changes); no longer written.
    changed: list[str] = Field(default_factory=list)


class RatingsSummary(_Versioned):
    """ratings.json of the arena: Bradley–Terry / Elo per model (best first) and every pair that met."""

    config: dict[str, Any]
    n_battles: int
    n_counted: int
    models: list[dict[str, Any]]
    pairwise: list[dict[str, Any]]


class HeadToHeadSummary(_Versioned):
    """head_to_head.json of the arena: the model pairs and the concepts each pair's first model wins on."""

    # 2: `model_concepts` entries say heldout_residual (+ _low / _high) where they said residual_heldout.
    version: ClassVar[int] = 2

    pairs: list[dict[str, Any]]


class ExtractManifest(_Versioned):
    """ROWS.manifest.json beside the rows.parquet of `cg-ray extract`: the input, the reader, counts.

    Only the reader is required to read one: other tools (and older versions) wrote shorter manifests."""

    reader: dict[str, Any]
    input: str | None = None
    text: str | None = None
    counts: dict[str, Any] = Field(default_factory=dict)
    d_sae: int | None = None


class TrainingStats(_Versioned):
    """training.json beside an SAE trained by `cg-ray sae train`: its settings, tokens and time."""

    config: dict[str, Any]
    trained_tokens: int
    seconds: float


class SaeEvaluation(_Versioned):
    """eval.json of `cg-ray sae eval`: held-out explained variance, L0 and dead latents of an SAE."""

    explained_variance: float
    l0: float
    dead_latents: int


class Themes(_Versioned):
    """themes.json of `cg-ray describe` / `cg-ray explain`: co-active concept groups and the summary."""

    method: dict[str, Any]
    themes: list[dict[str, Any]]
    unthemed: list[int]
    summary: dict[str, Any]


class ValidateReport(_Versioned):
    """validate.json of `cg-ray validate`: held-out lift / low-performance curves of the weakness profile."""

    # 2: the `beyond` block (slices, failure modes, residual lift); 3: null_check; 4: the split keeps row groups
    # whole, `beyond` is the run's own judgement (cg_ray.profile.validate_findings), the null check permutes
    # whole groups and counts slices beyond the adjusted fields too. 5: the `beyond` block's failure modes and
    # concepts say heldout_residual (+ _low / _high) and in_sample_residual where they said residual.
    version: ClassVar[int] = 5

    split: dict[str, Any]
    lift: list[dict[str, Any]]
    low_performance: dict[str, Any]
    baselines: dict[str, Any]
    # The findings rerun on whole groups' scores permuted within the adjusted cells (cg_ray.profile.nullcheck);
    # null: not run.
    null_check: dict[str, Any] | None = None


Doc = TypeVar("Doc", bound=_Versioned)
Value = TypeVar("Value")  # a document's values, kept as the producer typed them (format_version is an int)
Versioned = _Versioned  # the base of every document model (the run-directory layout names them)


def versioned(doc: Mapping[str, Value], version: int = FORMAT_VERSION) -> dict[str, Value | int]:
    """The document with `format_version` first (the only field this contract adds to what producers write)."""
    return {"format_version": version, **doc}


def write_document(path: Path, model: type[Doc], doc: Mapping[str, object], **dumps: Any) -> dict[str, Any]:
    """Check `doc` against its model, then write it as JSON exactly as given (with its format version)."""
    out = versioned(doc, model.version)
    model.model_validate(out)
    path.write_text(json.dumps(out, indent=2, **dumps) + "\n", encoding="utf-8")
    return out


def read_document(path: Path, model: type[Doc]) -> Doc:
    """The document at `path` as `model`; a newer `format_version` is refused with an error naming the file."""
    return _checked(path, _load(path), model)


def read_mapping(path: Path, model: type[Doc]) -> dict[str, Any]:
    """The document as the plain mapping it was written as, once checked against `model` like `read_document`."""
    data = _load(path)
    _checked(path, data, model)
    return data


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("not found", path=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON ({exc.msg})", path=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=str(path))
    return data


def _checked(path: Path, data: dict[str, Any], model: type[Doc]) -> Doc:
    version = data.get("format_version", 0)  # 0: written before documents were versioned; same layout
    if isinstance(version, int) and version > model.version:
        raise InputError(
            f"format_version {version} is newer than this cg_ray reads ({model.version}): upgrade cg_ray",
            path=str(path),
            field="format_version",
        )
    try:
        return model.model_validate({**data, "format_version": version})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(first["msg"], path=str(path), field=".".join(map(str, first["loc"]))) from None
