"""What `cg-ray describe` needs from a finished run directory: its rows, concept table, which concepts to
describe, and — when the run says how its rows were read — the reader and the text of each row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.config import DEFAULT_READER_FACTORY
from cg_ray.artifacts.contract import ExtractManifest, RunManifest, read_mapping
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.rows import RowsFile, open_rows
from cg_ray.config import canonical_text_mode
from cg_ray.errors import InputError


@dataclass
class Run:
    path: Path
    rows: RowsFile
    concepts: dict[int, dict[str, Any]]  # concept_id → its concepts.parquet row
    summary: dict[str, Any]
    reader: str | None = None  # the reader named by the user (`--reader`), over what the run records


def open_run(path: Path, reader: str | None = None) -> Run:
    run = RunDir(path)
    run.require(S.ROWS_FILE, S.CONCEPTS_FILE, S.SUMMARY_FILE)
    rows = open_rows(run.rows)
    table = pq.read_table(run / S.CONCEPTS_FILE).to_pylist()
    concepts = {int(r["concept_id"]): r for r in table}
    summary = run.read_summary()
    return Run(path, rows, concepts, summary, reader)


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
                raise InputError(f"concept {c} is not in concepts.parquet", path=str(run.path), field="concept_id")
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
        path = RunDir(run.path) / name
        if path.is_file():
            schema = pq.read_schema(path)
            if "concept_id" not in schema.names:
                raise InputError("has no concept_id column", path=str(path), field="concept_id")
            for c in pq.read_table(path, columns=["concept_id"]).column("concept_id").to_pylist():
                if c is not None and int(c) in run.concepts:
                    reasons.setdefault(int(c), []).append(name.removesuffix(".parquet"))
    if not reasons:
        raise InputError("no concepts to describe: the run's rankings are empty (pass --concepts)", path=str(run.path))
    return Selection(list(reasons), reasons)


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
    manifest = RunDir(run.path).manifest
    if manifest.is_file() and _records_reader(manifest):  # `cg-ray run` (not a steps-only manifest)
        return _from_run_manifest(manifest)
    rows_file = run.summary.get("rows_file")
    if not rows_file:
        return "the run has no manifest saying how its rows were read"
    from cg_ray.activations.extract import manifest_path

    given = Path(rows_file)
    places = [manifest_path(given), manifest_path(run.path / given), manifest_path(run.path.parent / given.name)]
    for path in dict.fromkeys(places):
        if path.is_file():  # `cg-ray extract` + `cg-ray metrics`
            return _from_extract_manifest(path)
    return f"no extract manifest beside {rows_file}"


def named_reader(reader: str) -> ReadSettings | str:
    """`--reader`: `default` (the embedded reader's settings), `MODEL@SAE` (reader defaults otherwise), or a
    manifest file (`manifest.json` of `cg-ray run`, `ROWS.manifest.json` of `cg-ray extract`). The rows are
    taken to have been read from their prompt, as `cg-ray extract` and `cg-ray run` do by default, unless a
    manifest says otherwise."""
    path = Path(reader)
    if path.is_file():
        return _from_run_manifest(path) if path.name == S.MANIFEST_FILE else _from_extract_manifest(path)
    if reader == "default":
        return ReadSettings({}, "prompt", False, "--reader default")
    model, sep, sae = reader.partition("@")
    if not (sep and model and sae):
        raise InputError(f"{reader!r} is not default, MODEL@SAE or a manifest file", field="--reader")
    return ReadSettings({"model": model, "sae": sae}, "prompt", False, f"--reader {reader}")


def _records_reader(manifest: Path) -> bool:
    return bool(read_mapping(manifest, RunManifest).get("config", {}).get("reader"))


def _from_run_manifest(manifest: Path) -> ReadSettings | str:
    data = read_mapping(manifest, RunManifest)
    reader = dict(data.get("config", {}).get("reader") or {})
    if not reader:
        return f"{manifest} has no reader settings"
    factory = (data.get("reader") or {}).get("factory", DEFAULT_READER_FACTORY)
    if factory != DEFAULT_READER_FACTORY:
        return f"the run was read by a stand-in reader ({factory})"
    text = canonical_text_mode(reader.pop("text", "prompt"), warn=False)
    reader.pop("resources", None)
    return ReadSettings(reader, text, False, str(manifest))


def _from_extract_manifest(path: Path) -> ReadSettings | str:
    data = read_mapping(path, ExtractManifest)
    r = data.get("reader") or {}
    tokens = r.get("tokens") or {}
    try:
        reader = {
            "model": r["model"],
            "sae": r["sae"]["spec"],
            "layer": r["layer"],
            "dtype": r["dtype"],
            "max_tokens": r["max_tokens"],
            "padding_side": r.get("padding_side", "right"),
            "exclude_bos": tokens["exclude_bos"],
            "prepend_bos": tokens["prepend_bos"],
            "sink_positions": tokens["sink_positions"],
            "exclude_special_tokens": tokens["exclude_special_tokens"],
        }
    except (KeyError, TypeError) as exc:
        return f"{path} lacks reader setting {exc}"
    text = canonical_text_mode(str(data.get("text", "prompt")), warn=False)  # `both` in older manifests
    return ReadSettings(reader, text, bool(data.get("chat_template")), str(path))


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
