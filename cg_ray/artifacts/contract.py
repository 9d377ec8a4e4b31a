"""The run-directory contract: where each artifact lives (`RunDir`, `ArenaDir`) and the typed, versioned
JSON documents in it (`RunSummary` = summary.json, `RunManifest` = manifest.json, `ArenaSummary` =
arena.json, `DiffSummary` = diff.json of `cg-ray diff`, `RobustnessReport` = robustness.json,
`RatingsSummary` = ratings.json, `HeadToHeadSummary` = head_to_head.json, `ExtractManifest` = the manifest of
`cg-ray extract`, `TrainingStats` = an SAE's training.json, `SaeEvaluation` = its eval.json). File names come
from `cg_ray.schemas` (the one list of them).

Every JSON document carries `format_version`. Readers accept documents without one (made before it
existed, same layout as version 1) and refuse a newer version with a clear error instead of misreading it.
Bump the version when a field changes meaning or goes away; adding a field needs no bump.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cg_ray import schemas as S
from cg_ray.errors import InputError

FORMAT_VERSION = 1


class RunDir:
    """A published run directory (`cg-ray metrics`, `cg-ray run`, a service analysis, one arena model)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = path / S.ROWS_FILE
        self.summary = path / S.SUMMARY_FILE
        self.manifest = path / S.MANIFEST_FILE
        self.report = path / S.REPORT_FILE

    def __truediv__(self, name: str) -> Path:
        """Any other artifact, by its name in `cg_ray.schemas` (`run / S.CONCEPTS_FILE`)."""
        return self.path / name


class ArenaDir:
    """A published arena run: ratings, head-to-head tables, and a `RunDir` per model of interest."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.summary = path / S.ARENA_FILE
        self.ratings_dir = path / S.RATINGS_DIR
        self.ratings = self.ratings_dir / S.RATINGS_JSON
        self.head_to_head_json = path / S.HEAD_TO_HEAD_JSON

    def model(self, folder: str) -> RunDir:
        return RunDir(self.path / S.ARENA_MODELS_DIR / folder)


class _Versioned(BaseModel):
    # Producers add fields over time (the `extra_summary` of each producer): kept, not refused.
    model_config = ConfigDict(extra="allow")

    format_version: int = Field(FORMAT_VERSION, ge=0, description="layout version of this document")


class RunSummary(_Versioned):
    """summary.json: the suite's CG metrics, per-benchmark statistics, rankings and the settings used."""

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
    """manifest.json of `cg-ray run`: what produced the run (config, versions, timings, counts)."""

    cg_ray_version: str
    config: dict[str, Any]
    counts: dict[str, Any]
    stages: dict[str, Any]


class ArenaSummary(_Versioned):
    """arena.json: the arena job's config, its models (name -> folder under models/), row counts."""

    config: dict[str, Any]
    models: dict[str, str]
    row_counts: dict[str, Any]
    seconds: float


class DiffSummary(_Versioned):
    """diff.json of `cg-ray diff`: the two runs, how their rows paired, and the confident changes."""

    kind: str
    runs: dict[str, Any]
    config: dict[str, Any]
    counts: dict[str, Any]
    top_regressed: list[dict[str, Any]]
    top_improved: list[dict[str, Any]]


class DiffModelsSummary(_Versioned):
    """hypotheses.json of `cg-ray diff-models`: the two models, how their answers paired, the hypotheses
    formed on half of the prompts and whether each replicated on the other half."""

    kind: str
    models: dict[str, str]
    config: dict[str, Any]
    counts: dict[str, Any]
    replication: dict[str, Any]
    hypotheses: list[dict[str, Any]]


class RobustnessReport(_Versioned):
    """robustness.json of `cg-ray robustness`: subsampling stds and the adversarial ablation's shifts."""

    rows_file: str
    config: dict[str, Any]
    robustness: dict[str, Any]
    subsampling: dict[str, Any]
    adversarial_ablation: dict[str, Any]


class RatingsSummary(_Versioned):
    """ratings.json of the arena: Bradley–Terry / Elo per model (best first) and every pair that met."""

    config: dict[str, Any]
    n_battles: int
    n_counted: int
    models: list[dict[str, Any]]
    pairwise: list[dict[str, Any]]


class HeadToHeadSummary(_Versioned):
    """head_to_head.json of the arena: the model pairs and the concepts each pair's first model wins on."""

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


Doc = TypeVar("Doc", bound=_Versioned)


def versioned(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with `format_version` first (the only field this contract adds to what producers write)."""
    return {"format_version": FORMAT_VERSION, **doc}


def write_document(path: Path, model: type[Doc], doc: dict[str, Any], **dumps: Any) -> dict[str, Any]:
    """Check `doc` against its model, then write it as JSON exactly as given (with its format version)."""
    out = versioned(doc)
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
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise InputError(
            f"format_version {version} is newer than this cg_ray reads ({FORMAT_VERSION}): upgrade cg_ray",
            path=str(path),
            field="format_version",
        )
    try:
        return model.model_validate({**data, "format_version": version})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(first["msg"], path=str(path), field=".".join(map(str, first["loc"]))) from None


def read_summary(run_dir: Path) -> dict[str, Any]:
    """summary.json as the plain mapping it was written as (checked against `RunSummary` first)."""
    return read_mapping(RunDir(run_dir).summary, RunSummary)


def read_arena_summary(arena_dir: Path) -> ArenaSummary:
    return read_document(ArenaDir(arena_dir).summary, ArenaSummary)
