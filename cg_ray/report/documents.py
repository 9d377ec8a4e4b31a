"""The run's documents as JSON-ready dicts: what the explorer (cg_ray/serve/ui) draws, in the service and in a
report alike. The service's routes return them (through their response models) and `cg-ray report` embeds
`run_view` in report.html, so both show the same numbers by construction. Each takes the run as a `RunDir`."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, TypeVar, cast

import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.contract import ValidateReport, read_mapping
from cg_ray.artifacts.layout import ROBUSTNESS_JSON, RunDir
from cg_ray.artifacts.renamed import RUN_COLUMNS, judgement_in, read_renamed
from cg_ray.artifacts.rows import open_rows
from cg_ray.describe.config import REPORT_TOP
from cg_ray.describe.outputs import read_descriptions, read_themes
from cg_ray.profile.terms import term_pattern
from cg_ray.report.examples import salient_rows
from cg_ray.report.findings import (
    judged_text,
    measured_text,
    null_check_text,
    power_text,
    probe_command,
    probe_gap,
    row_texts,
    term_shares_text,
    tried,
)
from cg_ray.report.probe import probe_view
from cg_ray.report.scope import scope_view
from cg_ray.report.sensitivity import annotate, read_sensitivity, sensitivity_view

PROFILE_FILES: dict[str, str] = {
    "weaknesses": S.WEAKNESSES_FILE,
    "strengths": S.STRENGTHS_FILE,
    "coverage_gaps": S.COVERAGE_GAPS_FILE,
    "slices": S.SLICES_FILE,
    "failure_modes": S.FAILURE_MODES_FILE,
}
# The concept table's columns in a view (the explorer's table and its filters; the rest is in concepts.parquet).
CONCEPT_COLUMNS = (
    "concept_id",
    "label",
    "X_bench",
    "X_model",
    "n_benchmarks_active",
    "n_active_rows",
    "coverage_class",
    "is_model_gap",
    "n_eff",
    "X_model_low",
    "X_model_high",
    "adjusted_gap",
)
SNIPPET_CHARS = 260
VIEW_PROFILE_LIMIT = 50  # entries per profile in a view (the explorer shows at most this many)


J = TypeVar("J")


def clean(value: J) -> J:
    """JSON-ready: NaN and infinities become null (JSON has neither), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return cast(J, None)
    if isinstance(value, dict):
        return cast(J, {k: clean(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return cast(J, [clean(v) for v in value])
    return value


def summary(run: RunDir) -> dict[str, Any]:
    return clean(run.read_summary())


def marked_snippet(text: str, terms: list[str]) -> dict[str, Any]:
    """A snippet of `text` around the first term and the [start, end) spans of every term in it: the view marks
    them (cg_ray.profile.terms.term_pattern: whole words, as the tokeniser reads them)."""
    pattern = term_pattern(terms)
    first = pattern.search(text) if pattern is not None else None
    start = max(0, first.start() - SNIPPET_CHARS // 3) if first else 0
    body = text[start : start + SNIPPET_CHARS]
    head = "…" if start else ""
    snippet = head + body + ("…" if start + SNIPPET_CHARS < len(text) else "")
    marks = [] if pattern is None else [[m.start() + len(head), m.end() + len(head)] for m in pattern.finditer(body)]
    return {"snippet": snippet, "marks": marks}


def profile(run: RunDir, kind: str, limit: int) -> dict[str, Any] | None:
    """A profile file's entries in rank order with the run's profile settings (None: the run has none).
    Failure modes carry their example rows' texts, the terms marked."""
    table = run.read_table(PROFILE_FILES[kind])
    if table is None:
        return None
    settings = run.read_summary().get("profile", {})
    items = clean(table.slice(0, limit).to_pylist())
    if kind == "slices":
        for item in items:
            item["conditions"] = json.loads(item["conditions"])
    if kind == "failure_modes":
        texts = row_texts(run, {rid for item in items for rid in item["example_row_ids"]})
        for item in items:
            item["examples"] = [
                {"row_id": rid, **texts[rid], **marked_snippet(texts[rid]["text"], item["terms"])}
                for rid in item["example_row_ids"]
                if rid in texts
            ]
    beyond = settings.get("beyond") or {}
    judged = judgement_in(beyond)
    for item in items:  # in the CLI's words
        item["measured"] = measured_text(item, (judged or {}).get("splits"))
        item["power"] = power_text(item, kind)
        if kind == "failure_modes":
            item["shares_text"] = term_shares_text(item)
    annotate(read_sensitivity(run), kind, items)  # "other readers", where `cg-ray sensitivity` ran
    has_verdicts = "confirmed" in table.column_names  # over the whole file: "2 confirmed" whatever the page
    return {
        "judged": judged_text(judged),
        "tried": tried(judged, kind, range(table.num_rows)),
        "kind": kind,
        "adjusted_for": beyond.get("adjusted_for"),
        "rank_by": settings.get("rank_by"),
        "duplicate_jaccard": settings.get("duplicate_jaccard"),
        "confidence": settings.get("confidence"),
        "total": table.num_rows,
        "n_confirmed": int(pc.sum(table["confirmed"]).as_py() or 0) if has_verdicts else None,
        "judgement": judged,
        # the next step where rows cannot settle a mode: the CLI in a report, the REST route in the service
        "probe_gap": probe_gap(items) if kind == "failure_modes" else "",
        "probe_command": probe_command(run.path.name, items) if kind == "failure_modes" else "",
        "items": items,
    }


def distributions(run: RunDir) -> dict[str, Any]:
    """The values behind the histograms: X_bench of present concepts, X_model, χ_model per benchmark."""
    concepts = pq.read_table(run.file(S.CONCEPTS_FILE), columns=["X_bench", "X_model"])
    pairs = pq.read_table(run.file(S.BENCHMARK_CONCEPTS_FILE), columns=["benchmark", "chi_model"])
    eps = run.read_summary()["config"]["epsilon"]
    x_bench = concepts["X_bench"]
    per_bench = {
        name: pairs.filter(pc.equal(pairs["benchmark"], name))["chi_model"].drop_null().to_pylist()
        for name in pc.unique(pairs["benchmark"]).to_pylist()
    }
    return clean(
        {
            "X_bench": x_bench.filter(pc.greater_equal(x_bench, eps)).to_pylist(),
            "X_model": concepts["X_model"].drop_null().to_pylist(),
            "per_benchmark_chi_model": per_bench,
        }
    )


def concept_details(run: RunDir, concept_ids: list[int], examples: int = 5) -> dict[int, dict[str, Any]]:
    """Per concept: its row, its per-benchmark rows, best and worst salient examples and (if described) its
    description; one pass over rows.parquet for all of them."""
    concepts = read_renamed(run.file(S.CONCEPTS_FILE), None, RUN_COLUMNS[S.CONCEPTS_FILE])  # an older run's too
    ids = sorted({c for c in concept_ids if 0 <= c < concepts.num_rows})
    if not ids:
        return {}
    pairs = pq.read_table(run.file(S.BENCHMARK_CONCEPTS_FILE))
    pairs = pairs.filter(pc.is_in(pairs["concept_id"], value_set=pc.cast(ids, pairs["concept_id"].type)))
    by_concept: dict[int, list[dict[str, Any]]] = {}
    for r in pairs.to_pylist():
        by_concept.setdefault(r.pop("concept_id"), []).append(r)
    model = run.read_summary().get("model_filter")  # a run of one model of a multi-model rows file
    salient = salient_rows(open_rows(run.rows), ids, per_concept=examples * 8, model=model)
    described = {d["concept_id"]: d for d in read_descriptions(run) or []}
    out = {}
    for c in ids:
        rows = [dataclasses.asdict(e) for e in salient.get(c, []) if e.score is not None]
        out[c] = clean(
            {
                **concepts.slice(c, 1).to_pylist()[0],
                "benchmarks": by_concept.get(c, []),
                "best_examples": [e for e in rows if e["score"] >= 0.5][:examples],
                "worst_examples": [e for e in rows if e["score"] < 0.5][:examples],
                "readable": described.get(c),
            }
        )
    return out


def validation(path: Path | None) -> dict[str, Any] | None:
    """validate.json (refused, naming the file, when its format is newer than this cg_ray reads)."""
    if path is None or not path.is_file():
        return None
    report = clean(read_mapping(path, ValidateReport))
    report["null_check_text"] = null_check_text(report.get("null_check"))
    return report


def robustness(run: RunDir) -> dict[str, Any] | None:
    return clean(run.read_json_if_present(ROBUSTNESS_JSON))


def concept_columns(run: RunDir) -> dict[str, list[Any]]:
    """The concept table, column by column (compact), with each concept's `cg-ray describe` sentence."""
    table = pq.read_table(run.file(S.CONCEPTS_FILE), columns=list(CONCEPT_COLUMNS))
    columns = {name: clean(table[name].to_pylist()) for name in CONCEPT_COLUMNS}
    sentences = {d["concept_id"]: d["description"] for d in read_descriptions(run) or []}
    columns["description"] = [sentences.get(c) for c in columns["concept_id"]]
    return columns


def active_by_benchmark(run: RunDir) -> dict[str, list[int]]:
    pairs = pq.read_table(run.file(S.BENCHMARK_CONCEPTS_FILE), columns=["benchmark", "concept_id"])
    out: dict[str, list[int]] = {}
    for name, cid in zip(pairs["benchmark"].to_pylist(), pairs["concept_id"].to_pylist(), strict=True):
        out.setdefault(name, []).append(cid)
    return out


def run_view(
    run: RunDir, top: int = REPORT_TOP, examples: int = 3, validate: Path | None = None, name: str | None = None
) -> dict[str, Any]:
    """Everything the explorer draws for one run, in one document: `cg-ray report` embeds it, the service
    serves it (GET /v1/analyses/{id}/view). Details (examples, per-benchmark rows) come for the concepts of
    the rankings and profiles (`top` of each); the service answers the others on request."""
    the_summary = summary(run)
    profiles = {kind: profile(run, kind, VIEW_PROFILE_LIMIT) for kind in PROFILE_FILES}
    ranked = [e["concept_id"] for v in the_summary.get("rankings", {}).values() if isinstance(v, list) for e in v[:top]]
    for kind in ("weaknesses", "strengths", "coverage_gaps"):
        ranked += [e["concept_id"] for e in (profiles[kind] or {}).get("items", [])[:top]]
    return {
        "name": name or run.path.name,
        "summary": the_summary,
        "distributions": distributions(run),
        "profiles": {kind: p for kind, p in profiles.items() if p is not None},
        "concepts": concept_columns(run),
        "active_by_benchmark": active_by_benchmark(run),
        "details": concept_details(run, ranked, examples),
        "descriptions": clean(read_descriptions(run)),
        "themes": clean(read_themes(run)),
        "validation": validation(validate if validate is not None else run.file(S.VALIDATE_FILE)),
        "robustness": robustness(run),
        "probe": probe_view(run),
        "scope": scope_view(run),
        # only where `cg-ray sensitivity` ran: a run without it keeps the documents (and report.html) it had
        **({"sensitivity": clean(sensitive)} if (sensitive := sensitivity_view(run)) else {}),
    }
