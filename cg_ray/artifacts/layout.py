"""Where every artifact of a run directory lives, and the only code that joins those paths.

`RUN_ARTIFACTS` names each file of a run directory once (path inside the run, kind, the command that writes
it, and for JSON its `cg_ray.artifacts.contract` model); `ARENA_ARTIFACTS` the same for an arena run. `RunDir`
and the other directory classes hand out those paths (an unknown name is refused) and read them through their
models. This module is also the one writer of those directories: `ArtifactDir.write` (`write_table`,
`write_json`) while a directory is built in its temporary place, before `artifacts.publish` renames it into
place; `RunDir.update` once a run is published (each file replaced atomically, the step recorded in
manifest.json). Both write through `_write`, which checks a JSON document against its model.
tests/artifacts/test_one_writer.py keeps other modules from writing there.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeAlias

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from pydantic import ValidationError

from cg_ray import __version__
from cg_ray import schemas as S
from cg_ray.artifacts import contract as C
from cg_ray.artifacts.publish import atomic_file, locked
from cg_ray.artifacts.renamed import ARENA_COLUMNS, RUN_COLUMNS, read_renamed
from cg_ray.errors import CgRayError, InputError

Kind = Literal["json", "parquet", "html", "csv", "text"]
# What the writer writes for one file: a JSON document, text, bytes, a table (Parquet or CSV, as the artifact
# is), or a writer of the file.
Content: TypeAlias = "dict[str, Any] | str | bytes | pa.Table | Callable[[Path], object]"


@dataclass(frozen=True)
class Artifact:
    name: str  # path inside the run directory
    kind: Kind
    written_by: str  # the command / step that writes it
    model: type[C.Versioned] | None = None  # JSON: the document model it is read through
    nan: bool = False  # JSON: NaN written as such (else refused: JSON has none)


def _registry(*artifacts: Artifact) -> dict[str, Artifact]:
    return {a.name: a for a in artifacts}


ROBUSTNESS_JSON = f"{S.ROBUSTNESS_DIR}/{S.ROBUSTNESS_FILE}"
ROBUSTNESS_CONCEPTS = f"{S.ROBUSTNESS_DIR}/{S.ROBUSTNESS_CONCEPTS_FILE}"

RUN_ARTIFACTS: dict[str, Artifact] = _registry(
    Artifact(S.ROWS_FILE, "parquet", "metrics"),
    Artifact(S.CONCEPTS_FILE, "parquet", "metrics"),
    Artifact(S.BENCHMARK_CONCEPTS_FILE, "parquet", "metrics"),
    Artifact(S.SUMMARY_FILE, "json", "metrics", C.RunSummary),
    *(Artifact(name, "parquet", "metrics") for name in S.PROFILE_FILES),
    Artifact(S.SLICES_FILE, "parquet", "metrics"),
    Artifact(S.FAILURE_MODES_FILE, "parquet", "metrics"),  # explain rewrites its descriptions
    *(Artifact(n, "csv", "metrics") for n in (S.OFFICIAL_COVERAGE_CSV, S.OFFICIAL_SALIENCY_CSV, S.OFFICIAL_SCORES_CSV)),
    Artifact(S.MANIFEST_FILE, "json", "run", C.RunManifest),  # every post-publish step is recorded in it
    Artifact(S.REPORT_FILE, "html", "report"),
    Artifact(S.DESCRIPTIONS_FILE, "parquet", "describe"),
    Artifact(S.THEMES_FILE, "json", "describe", C.Themes),
    Artifact(S.EXPLANATIONS_FILE, "parquet", "explain"),
    Artifact(S.MODE_EXPLANATIONS_FILE, "parquet", "explain"),
    Artifact(S.VALIDATE_FILE, "json", "validate", C.ValidateReport),
    Artifact(ROBUSTNESS_JSON, "json", "robustness", C.RobustnessReport, nan=True),  # stds of never-active concepts
    Artifact(ROBUSTNESS_CONCEPTS, "parquet", "robustness"),
)


def _analysis(
    step: str, folder: str, tables: tuple[str, ...], summary: type[C.Versioned], exported: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """Register the folder a post-publish analysis writes in a run (its tables, summary.json, its export/ text
    files) and return the tables' and the summary's paths, in that order."""
    names = tuple(f"{folder}/{n}" for n in (*tables, "summary.json"))
    texts = (Artifact(f"{folder}/export/{n}", "text", step) for n in exported)
    parquet = (Artifact(n, "parquet", step) for n in names[:-1])
    RUN_ARTIFACTS.update(_registry(*parquet, Artifact(names[-1], "json", step, summary), *texts))
    return names


PROBE_EXPORT, AUGMENT_EXPORT = f"{S.PROBE_DIR}/{S.PROBE_EXPORT_DIR}", f"{S.AUGMENT_DIR}/{S.AUGMENT_EXPORT_DIR}"
PROBE_ITEMS, PROBE_RESULTS, PROBE_SUMMARY = _analysis(
    "probe", S.PROBE_DIR, (S.PROBE_ITEMS_FILE, S.PROBE_RESULTS_FILE), C.ProbeSummary, (*S.PROBE_EXPORT_FILES.values(),)
)
SCOPE_GAPS, SCOPE_COVERAGE, SCOPE_ROWS, SCOPE_SUMMARY = _analysis(
    "scope", S.SCOPE_DIR, (S.SCOPE_GAPS_FILE, S.SCOPE_COVERAGE_FILE, S.SCOPE_ROWS_FILE), C.ScopeSummary
)
AUGMENT_ITEMS, AUGMENT_COVERAGE, AUGMENT_SUMMARY = _analysis(
    "augment", S.AUGMENT_DIR, (S.AUGMENT_ITEMS_FILE, S.AUGMENT_COVERAGE_FILE), C.AugmentSummary,
    (*S.AUGMENT_EXPORT_FILES.values(),),
)  # fmt: skip
SENSITIVITY_FINDINGS, SENSITIVITY_PAIRS, SENSITIVITY_SUMMARY = _analysis(
    "sensitivity", S.SENSITIVITY_DIR, (S.SENSITIVITY_FINDINGS_FILE, S.SENSITIVITY_PAIRS_FILE), C.SensitivitySummary
)

ARENA_RATINGS_JSON = f"{S.RATINGS_DIR}/{S.RATINGS_JSON}"
ARENA_ARTIFACTS: dict[str, Artifact] = _registry(
    Artifact(S.ARENA_FILE, "json", "arena", C.ArenaSummary),
    Artifact(ARENA_RATINGS_JSON, "json", "arena", C.RatingsSummary),
    Artifact(f"{S.RATINGS_DIR}/{S.RATINGS_PARQUET}", "parquet", "arena"),
    Artifact(f"{S.RATINGS_DIR}/{S.PAIRWISE_FILE}", "parquet", "arena"),
    Artifact(S.HEAD_TO_HEAD_FILE, "parquet", "arena"),
    Artifact(S.HEAD_TO_HEAD_JSON, "json", "arena", C.HeadToHeadSummary),
    Artifact(S.MODEL_CONCEPTS_FILE, "parquet", "arena"),
    Artifact(S.REPORT_FILE, "html", "arena"),  # the ratings page (cg_ray.report.comparisons.arena_view)
)

MODEL_DIFF_TABLE, MODEL_DIFF_JSON, MODEL_DIFF_HTML = "diff_models.parquet", "hypotheses.json", "diff_models.html"
MODEL_DIFF_PAIRS = "pairs.parquet"  # the paired answers' s̃, kept by the service for its examples


class ArtifactDir:
    """A directory whose files are the registry's `ARTIFACTS`."""

    ARTIFACTS: ClassVar[dict[str, Artifact]] = {}
    RENAMED: ClassVar[Mapping[str, Mapping[str, str]]] = {}  # file -> old column -> new (artifacts.renamed)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def artifact(self, name: str) -> Artifact:
        try:
            return self.ARTIFACTS[name]
        except KeyError:
            raise CgRayError(
                f"{name!r} is not an artifact of a {type(self).__name__} (cg_ray.artifacts.layout)"
            ) from None

    def file(self, name: str) -> Path:
        """The path of artifact `name` (refused when the registry does not name it)."""
        return self.path / self.artifact(name).name

    __truediv__ = file

    def has(self, name: str) -> bool:
        return self.file(name).is_file()

    def read_json(self, name: str) -> dict[str, Any]:
        """A JSON artifact as written, once checked against its model (a newer format_version is refused)."""
        return C.read_mapping(self.file(name), self._model(name))

    def read_doc(self, name: str) -> C.Versioned:
        return C.read_document(self.file(name), self._model(name))

    def read_json_if_present(self, name: str) -> dict[str, Any] | None:
        return self.read_json(name) if self.has(name) else None

    def write(self, name: str, content: Content) -> Path:
        """Write artifact `name` while the directory is being built in its temporary place, before
        `artifacts.publish` renames it into place (a published run changes through `RunDir.update`)."""
        path = self._target(name)
        _write(self.artifact(name), path, content)
        return path

    def link(self, name: str, src: Path) -> Path:
        """`write` for a file that already exists elsewhere (the rows of `cg-ray metrics`): hard-linked when
        the file system allows it, else copied."""
        path = self._target(name)
        try:
            os.link(src, path)
        except OSError:
            shutil.copy2(src, path)
        return path

    def write_json(self, name: str, doc: Mapping[str, C.Value], **dumps: Any) -> dict[str, C.Value | int]:
        """`write` for a JSON document with its own `json.dumps` options; returns the document as written."""
        return C.write_document(self._target(name), self._model(name), doc, **dumps)

    def _target(self, name: str) -> Path:
        path = self.file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def read_table(self, name: str, columns: list[str] | None = None) -> pa.Table | None:
        """A Parquet artifact (None when the directory has none), an older layout's columns under their new
        names (`columns` are named the new way); unreadable files are named."""
        path = self.file(name)
        if not path.is_file():
            return None
        try:
            return read_renamed(path, columns, self.RENAMED.get(name, {}))
        except (pa.ArrowInvalid, OSError, KeyError) as exc:
            raise InputError(f"unreadable Parquet ({exc})", path=str(path)) from None

    def write_table(self, name: str, table: pa.Table) -> None:
        self.write(name, table)

    def _model(self, name: str) -> type[C.Versioned]:
        artifact = self.artifact(name)
        if artifact.model is None:
            raise CgRayError(f"{name} is a {artifact.kind} artifact, not a JSON document")
        return artifact.model


class _File:
    """A class attribute naming one artifact: `RunDir(p).rows` is `RunDir(p).file(S.ROWS_FILE)`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, layout: ArtifactDir, owner: type[ArtifactDir] | None = None) -> Path:
        return layout.file(self.name)


class RunDir(ArtifactDir):
    """A run directory (`cg-ray metrics`, `cg-ray run`, a service analysis, one arena model)."""

    ARTIFACTS = RUN_ARTIFACTS
    RENAMED = RUN_COLUMNS

    rows = _File(S.ROWS_FILE)
    summary = _File(S.SUMMARY_FILE)
    manifest = _File(S.MANIFEST_FILE)
    report = _File(S.REPORT_FILE)

    @classmethod
    def published(cls, path: str | os.PathLike[str]) -> RunDir | None:
        """The run directory at `path` when it is a published run (has summary.json), else None."""
        run = cls(path)
        return run if run.has(S.SUMMARY_FILE) else None

    def require(self, *names: str, hint: str = "run `cg-ray metrics` first") -> None:
        """Refuse a directory that lacks any of `names`, naming the first missing file."""
        if not self.path.is_dir():
            raise InputError("not a run directory", path=str(self.path))
        for name in names:
            if not self.has(name):
                raise InputError(f"not a run directory: {name} is missing ({hint})", path=str(self.path))

    def read_summary(self) -> dict[str, Any]:
        return self.read_json(S.SUMMARY_FILE)

    def sensitivity_reader(self, name: str) -> RunDir:
        """The run's rows re-read by reader `name` and judged again: `cg-ray sensitivity`'s run directory."""
        return RunDir(self.path / S.SENSITIVITY_DIR / S.SENSITIVITY_READERS_DIR / name)

    def steps(self) -> list[dict[str, Any]]:
        """The post-publish steps recorded in manifest.json, oldest first."""
        manifest = self.read_json_if_present(S.MANIFEST_FILE)
        return list((manifest or {}).get("steps") or [])

    def update(self, step: str, files: Mapping[str, Content], details: Mapping[str, object] | None = None) -> list[str]:
        """Replace `files` of a published run, each atomically (all written before any is replaced), and record
        `{step, at, files, **details}` in manifest.json. The report that shows them is rebuilt by the command
        that ran the step (`cg_ray.report.refresh`), a layer that may import the report."""
        self.require(S.SUMMARY_FILE, hint="only a published run can be updated")
        names = list(files)
        with locked(self.path), contextlib.ExitStack() as stack:
            for name, content in files.items():
                tmp = stack.enter_context(atomic_file(self.file(name)))
                _write(self.artifact(name), tmp, content)
            stack.close()  # every file written: now each replaces its target
            self._record(step, names, dict(details or {}))
        return names

    def _record(self, step: str, names: list[str], details: dict[str, Any]) -> None:
        manifest = self.read_json_if_present(S.MANIFEST_FILE) or {"cg_ray_version": __version__}
        at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        manifest["steps"] = [*(manifest.get("steps") or []), {"step": step, "at": at, "files": names, **details}]
        with atomic_file(self.manifest) as tmp:
            C.write_document(tmp, C.RunManifest, manifest, default=str)


class ArenaDir(ArtifactDir):
    """A published arena run: ratings, head-to-head tables, and a `RunDir` per model of interest."""

    ARTIFACTS = ARENA_ARTIFACTS
    RENAMED = ARENA_COLUMNS

    summary = _File(S.ARENA_FILE)
    ratings = _File(ARENA_RATINGS_JSON)
    head_to_head_json = _File(S.HEAD_TO_HEAD_JSON)

    @property
    def ratings_dir(self) -> RatingsDir:
        return RatingsDir(self.path / S.RATINGS_DIR)

    def model(self, folder: str) -> RunDir:
        return RunDir(self.path / S.ARENA_MODELS_DIR / folder)

    def models(self) -> list[RunDir]:
        root = self.path / S.ARENA_MODELS_DIR
        return [RunDir(p) for p in sorted(root.iterdir()) if p.is_dir()] if root.is_dir() else []


# The output directories of the analyses beside run directories: each names its files in its class, so that
# no module joins an artifact name onto a directory itself (tests/test_code_shape.py checks it).


class RatingsDir(ArtifactDir):
    """Arena ratings: `cg-ray ratings --out`, or an arena run's ratings/."""

    ARTIFACTS = _registry(
        Artifact(S.RATINGS_JSON, "json", "ratings", C.RatingsSummary),
        Artifact(S.RATINGS_PARQUET, "parquet", "ratings"),
        Artifact(S.PAIRWISE_FILE, "parquet", "ratings"),
    )


class DiffDir(ArtifactDir):
    """`cg-ray diff --out` / a service diff: two runs paired by row."""

    ARTIFACTS = _registry(
        Artifact(S.DIFF_FILE, "parquet", "diff"),
        Artifact(S.DIFF_BENCHMARKS_FILE, "parquet", "diff"),
        Artifact(S.DIFF_JSON, "json", "diff", C.DiffSummary),
        Artifact(S.DIFF_HTML, "html", "diff"),
    )


class ModelDiffDir(ArtifactDir):
    """`cg-ray diff-models --out` / a service model diff: two models' answers paired by prompt."""

    ARTIFACTS = _registry(
        Artifact(MODEL_DIFF_TABLE, "parquet", "diff-models"),
        Artifact(MODEL_DIFF_JSON, "json", "diff-models", C.DiffModelsSummary),
        Artifact(MODEL_DIFF_HTML, "html", "diff-models"),
        Artifact(MODEL_DIFF_PAIRS, "parquet", "serve model-diff"),
    )


class RobustnessDir(ArtifactDir):
    """`cg-ray robustness` / `cg-ray validate --out DIR` when DIR is not a run (into a run: `RunDir.update`)."""

    ARTIFACTS = _registry(
        Artifact(S.ROBUSTNESS_FILE, "json", "robustness", C.RobustnessReport, nan=True),
        Artifact(S.ROBUSTNESS_CONCEPTS_FILE, "parquet", "robustness"),
        Artifact(S.VALIDATE_FILE, "json", "validate", C.ValidateReport),
    )


class SkillsDir(ArtifactDir):
    """`cg-ray skills --out`: loadings, profiles, redundancy, skills.json and its page."""

    ARTIFACTS = _registry(
        *(Artifact(f"{n}.csv", "csv", "skills") for n in ("loadings", "profiles", "redundancy", "profile_from_k")),
        Artifact("skills.json", "json", "skills"),
        Artifact(S.REPORT_FILE, "html", "skills"),
    )


ESTIMATE_TABLES = ("lomo_summary", "lomo_detail", "trace", "chosen_rows", "next_batch", "concepts")


class EstimateDir(ArtifactDir):
    """`cg-ray estimate --out`: the trace or leave-one-model-out tables, estimate.json and its page."""

    ARTIFACTS = _registry(
        *(Artifact(f"{n}.csv", "csv", "estimate") for n in ESTIMATE_TABLES),
        Artifact("estimate.json", "json", "estimate"),
        Artifact(S.REPORT_FILE, "html", "estimate"),
    )


def read_summary(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """summary.json as the plain mapping it was written as (checked against `RunSummary` first)."""
    return RunDir(run_dir).read_summary()


def read_arena_summary(arena_dir: str | os.PathLike[str]) -> C.ArenaSummary:
    return C.read_document(ArenaDir(arena_dir).summary, C.ArenaSummary)


def _write(artifact: Artifact, tmp: Path, content: Content) -> None:
    if callable(content):
        content(tmp)
    elif isinstance(content, pa.Table) and artifact.kind == "parquet":
        pq.write_table(content, tmp)
    elif isinstance(content, pa.Table) and artifact.kind == "csv":
        pacsv.write_csv(content, tmp)
    elif isinstance(content, pa.Table):
        raise CgRayError(f"{artifact.name} is a {artifact.kind} artifact, not a table")
    elif isinstance(content, dict):
        if artifact.model is None:
            raise CgRayError(f"{artifact.name} is not a JSON artifact with a model")
        try:
            C.write_document(tmp, artifact.model, content, ensure_ascii=False, allow_nan=artifact.nan)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputError(first["msg"], path=artifact.name, field=".".join(map(str, first["loc"]))) from None
    elif isinstance(content, bytes):
        tmp.write_bytes(content)
    else:
        tmp.write_text(content, encoding="utf-8")
    if artifact.model is not None:  # whatever wrote it: versioned and readable through its model
        C.read_document(tmp, artifact.model)
