"""What `cg-ray describe` needs from a finished run directory: its rows, concept table, which concepts to
describe, and — when the run says how its rows were read — the reader and the text of each row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.recorded import RecordedReader, reader_of_run
from cg_ray.artifacts.contract import RunManifest, read_mapping
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.rows import RowsFile, open_rows
from cg_ray.errors import InputError


@dataclass
class Run:
    dir: RunDir
    rows: RowsFile
    concepts: dict[int, dict[str, Any]]  # concept_id → its concepts.parquet row
    summary: dict[str, Any]
    reader: str | None = None  # the reader named by the user (`--reader`), over what the run records


def open_run(run: RunDir, reader: str | None = None) -> Run:
    run.require(S.ROWS_FILE, S.CONCEPTS_FILE, S.SUMMARY_FILE)
    rows = open_rows(run.rows)
    table = pq.read_table(run.file(S.CONCEPTS_FILE)).to_pylist()
    concepts = {int(r["concept_id"]): r for r in table}
    summary = run.read_summary()
    return Run(run, rows, concepts, summary, reader)


@dataclass(frozen=True)
class Selection:
    concept_ids: list[int]
    reasons: dict[int, list[str]] = field(default_factory=dict)


def select_concepts(run: Run, explicit: Sequence[int] | None, top: int) -> Selection:
    """Explicit ids; else the `top` worst by X_model and `top` least covered among eligible concepts (the
    run's rankings; among all active concepts when none is eligible), plus every concept of the weakness
    profile files present in the run."""
    reasons: dict[int, list[str]] = {}
    if explicit:
        for c in explicit:
            if c not in run.concepts:
                raise InputError(f"concept {c} is not in concepts.parquet", path=str(run.dir.path), field="concept_id")
            reasons.setdefault(int(c), []).append("requested")
        return Selection(list(reasons), reasons)
    rankings = run.summary.get("rankings", {})
    for key, why in (("worst_model", "worst_X_model"), ("least_covered", "least_covered")):
        for entry in rankings.get(key, [])[:top]:
            reasons.setdefault(int(entry["concept_id"]), []).append(why)
    if not reasons:  # no concept met the run's eligibility filters (small suites): rank all active ones
        active = [r for r in run.concepts.values() if r["n_active_rows"] > 0]
        worst = sorted((r for r in active if r["X_model"] is not None), key=lambda r: (r["X_model"], r["concept_id"]))
        least = sorted(active, key=lambda r: (r["X_bench"], r["concept_id"]))
        for rows, why in ((worst, "worst_X_model_unfiltered"), (least, "least_covered_unfiltered")):
            for r in rows[:top]:
                reasons.setdefault(int(r["concept_id"]), []).append(why)
    for name in S.PROFILE_FILES:  # the weakness profile's concepts, when present, are described too
        path = run.dir / name
        if path.is_file():
            schema = pq.read_schema(path)
            if "concept_id" not in schema.names:
                raise InputError("has no concept_id column", path=str(path), field="concept_id")
            for c in pq.read_table(path, columns=["concept_id"]).column("concept_id").to_pylist():
                if c is not None and int(c) in run.concepts:
                    reasons.setdefault(int(c), []).append(name.removesuffix(".parquet"))
    if not reasons:
        raise InputError(
            "no concepts to describe: the run's rankings are empty (pass --concepts)", path=str(run.dir.path)
        )
    return Selection(list(reasons), reasons)


def report_concepts(run: Run, top: int) -> Selection:
    """The concepts the report shows first: the first `top` of the weakness profile and of the coverage
    gaps (`weaknesses.parquet`, `coverage_gaps.parquet`); where the run has neither, the first `top` of its
    worst-by-X_model and least-covered rankings (`select_concepts` without the profile files)."""
    reasons: dict[int, list[str]] = {}
    for name, why in ((S.WEAKNESSES_FILE, "weaknesses"), (S.COVERAGE_GAPS_FILE, "coverage_gaps")):
        table = run.dir.read_table(name)
        if table is not None and "concept_id" in table.column_names:
            for c in table.column("concept_id").to_pylist()[:top]:
                if c is not None and int(c) in run.concepts:
                    reasons.setdefault(int(c), []).append(why)
    return Selection(list(reasons), reasons) if reasons else select_concepts(run, None, top)


@dataclass(frozen=True)
class ReadSettings:
    """How the run's rows were read: the reader config and how a row's text was composed."""

    reader: dict[str, Any]  # ReaderConfig fields
    text: str  # prompt | response | prompt_response
    chat_template: bool
    source: str  # which manifest said so


READER_HELP = "name it with --reader: default (the embedded reader), MODEL@SAE, or the manifest of its rows"


def read_settings(run: Run) -> ReadSettings | str:
    """The run's reader settings — from `--reader` when given, else from the run's manifest or the extract
    manifest beside its rows file — or the reason they are unknown."""
    if run.reader is not None:
        return named_reader(run.reader)
    rows_file = run.summary.get("rows_file")
    return _settings(reader_of_run(run.dir.path, None if rows_file is None else str(rows_file)))


def named_reader(reader: str) -> ReadSettings | str:
    """`--reader`: `default` (the embedded reader's settings), `MODEL@SAE` (reader defaults otherwise), or a
    manifest file (`manifest.json` of `cg-ray run`, `ROWS.manifest.json` of `cg-ray extract`). The rows are
    taken to have been read from their prompt, as `cg-ray extract` and `cg-ray run` do by default, unless a
    manifest says otherwise."""
    path = Path(reader)
    if path.is_file():
        return _settings(RecordedReader.from_file(path))
    if reader == "default":
        return ReadSettings({}, "prompt", False, "--reader default")
    model, sep, sae = reader.partition("@")
    if not (sep and model and sae):
        raise InputError(f"{reader!r} is not default, MODEL@SAE or a manifest file", field="--reader")
    return ReadSettings({"model": model, "sae": sae}, "prompt", False, f"--reader {reader}")


def _settings(recorded: RecordedReader) -> ReadSettings | str:
    """What describe needs to re-read rows with the recorded reader, or why it cannot."""
    if recorded.unknown is not None:
        return recorded.unknown
    if not recorded.real_reader:
        return f"the run was read by a stand-in reader ({recorded.factory})"
    if recorded.config is None:
        return recorded.config_missing or f"{recorded.source} has no reader settings"
    config = dict(recorded.config)
    if recorded.kind == "run" and config.get("dtype", "auto") == "auto" and recorded.source is not None:
        config["dtype"] = resolved_dtype(recorded.source) or "auto"
    return ReadSettings(config, recorded.text or "prompt", recorded.chat_template, str(recorded.source))


def resolved_dtype(manifest: Path) -> str | None:
    """The dtype `auto` became in a run's reader actors (manifest.json), when they all agree on one a reader
    config can name. A re-read elsewhere would resolve `auto` anew: a run read in bfloat16 on a GPU, re-read
    on a CPU without native bf16 in float32, differs from its stored s̃ by ~1% per pair (and more at TopK cuts)."""
    try:
        actors = (read_mapping(manifest, RunManifest).get("reader") or {}).get("actors") or []
    except (OSError, ValueError, InputError):
        return None
    dtypes = {a.get("dtype") for a in actors if isinstance(a, dict)}
    dtype = dtypes.pop() if len(dtypes) == 1 else None
    return dtype if dtype in ("float32", "bfloat16") else None


def row_text(record: dict[str, Any], settings: ReadSettings, tokenizer: Any) -> tuple[str, bool] | None:
    """The text the reader read for a row (and whether the tokenizer adds its special tokens)."""
    prompt, response = record.get("prompt"), record.get("response")
    parts = {"prompt": [prompt], "response": [response], "prompt_response": [prompt, response]}[settings.text]
    if any(p is None for p in parts if settings.text != "prompt_response") or all(p is None for p in parts):
        return None
    if settings.chat_template:
        messages = []
        if settings.text in ("prompt", "prompt_response") and prompt is not None:
            messages.append({"role": "user", "content": prompt})
        if settings.text in ("response", "prompt_response") and response is not None:
            messages.append({"role": "assistant", "content": response})
        return str(tokenizer.apply_chat_template(messages, tokenize=False)), False
    return "\n\n".join(p for p in parts if p), True
