"""`cg-ray describe RUN_DIR`: evidence → token detail → enrichment → descriptions → themes, written
atomically as RUN_DIR/descriptions.parquet and RUN_DIR/themes.json."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.layout import Content, RunDir
from cg_ray.describe import outputs as O
from cg_ray.describe.config import REPORT_TOP
from cg_ray.describe.descriptions import Candidate, Facts, describe_concept
from cg_ray.describe.enrichment import Enriched, enrich
from cg_ray.describe.evidence import Evidence, read_rows, scan
from cg_ray.describe.reread import reread_check
from cg_ray.describe.rundir import (
    READER_HELP,
    Run,
    open_run,
    read_settings,
    report_concepts,
    row_text,
    select_concepts,
)
from cg_ray.describe.spans import activating_span, snippet, top_spans, top_tokens
from cg_ray.describe.themes import FORMAT_VERSION, MIN_JACCARD, group, theme_name, theme_rows

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DescribeOptions:
    concepts: tuple[int, ...] | None = None
    top: int = REPORT_TOP  # worst-by-X_model and least-covered concepts, each
    examples: int = 5  # top rows per concept (re-read token by token)
    sample: int = 20  # held-out active rows per concept (detection scoring)
    background: int = 200  # random rows (detection negatives)
    seed: int = 0
    tokens: bool = True  # re-read the top rows with the run's reader
    dtype: str | None = None  # override the reader's dtype for the re-read
    alpha: float = 0.05
    min_jaccard: float = MIN_JACCARD
    reader_overrides: dict[str, Any] = field(default_factory=dict)
    reader: str | None = None  # `--reader`: names the run's reader when it records none (see rundir.named_reader)
    report_scope: bool = False  # without `concepts`: only those the report shows first (`cg-ray explain`)


@dataclass
class ConceptEvidence:
    """Per concept: the examples with their spans, the in-suite tokens and spans, the enrichment."""

    examples: list[dict[str, Any]]
    tokens: list[str]
    spans: list[str]
    enriched: list[Enriched]


@dataclass
class Analysis:
    run: Run
    evidence: Evidence
    reasons: dict[int, list[str]]
    per_concept: dict[int, ConceptEvidence]
    records: dict[int, dict[str, Any]]  # file row → id, benchmark, score, texts, metadata
    token_detail: dict[str, Any]
    text_mode: str = "prompt_response"  # which text of a row the reader read (prompt | response | prompt_response)
    reader_unknown: str | None = None  # why the run's reader could not be established (None: it was)

    def text_of(self, row: int) -> str:
        """The row's text as the reader read it (raw form), for snippets and detection."""
        return plain_text(self.records[row], self.text_mode)

    def facts(self, concept_id: int, terms: dict[int, list[str]]) -> Facts:
        """What the concept's offline candidates are drawn from (`terms`: `profile_terms` of the run)."""
        ce, concept = self.per_concept[concept_id], self.run.concepts[concept_id]
        adjusted_for = concept.get("adjusted_for") or ()
        return Facts(concept.get("label"), ce.enriched, ce.spans, ce.tokens, terms.get(concept_id, ()), adjusted_for)


def analyse(run_dir: RunDir, options: DescribeOptions) -> Analysis:
    run = open_run(run_dir, options.reader)
    if options.report_scope and not options.concepts:
        selection = report_concepts(run, options.top)
    else:
        selection = select_concepts(run, options.concepts, options.top)
    ids = selection.concept_ids
    log.info("describing %d concepts of %s", len(ids), run_dir)
    ev = scan(
        run.rows, ids, k=options.examples, sample=options.sample, background=options.background, seed=options.seed
    )
    wanted = {r for c in ids for r, _ in ev.top[c]} | {r for c in ids for r in ev.sample[c]}
    wanted |= {r for r, _ in ev.background}
    records = read_rows(run.rows, wanted)
    enriched = enrich(ev, alpha=options.alpha)
    settings = read_settings(run)
    text_mode = settings.text if not isinstance(settings, str) else "prompt_response"
    if isinstance(settings, str):
        log.warning("cannot establish the reader of %s (%s): no activating spans; %s", run_dir, settings, READER_HELP)
    details, token_info = _token_details(run, ev, records, options)
    per_concept: dict[int, ConceptEvidence] = {}
    for j, c in enumerate(ev.concept_ids):
        rows = [(r, v) for r, v in ev.top[c]]
        row_details = [details.get(r) for r, _ in rows]
        examples = []
        for (r, value), detail in zip(rows, row_details, strict=True):
            rec = records[r]
            text = detail.text if detail is not None else plain_text(rec, text_mode)
            span = activating_span(detail, j) if detail is not None else None
            snip, start, end = snippet(text, span)
            examples.append(
                {
                    "row_id": rec.get("row_id"),
                    "benchmark": rec.get("benchmark"),
                    "score": rec.get("score"),
                    "s_tilde": round(value, 6),
                    "snippet": snip,
                    "span_start": start,
                    "span_end": end,
                }
            )
        got = [d for d in row_details if d is not None]
        per_concept[c] = ConceptEvidence(
            examples, top_tokens(got, j) if got else [], top_spans(got, j) if got else [], enriched.get(c, [])
        )
    unknown = settings if isinstance(settings, str) else None
    return Analysis(run, ev, selection.reasons, per_concept, records, token_info, text_mode, unknown)


def plain_text(rec: dict[str, Any], mode: str = "prompt_response") -> str:
    keys = {"prompt": ("prompt",), "response": ("response",)}.get(mode, ("prompt", "response"))
    return "\n\n".join(str(rec[k]) for k in keys if rec.get(k)) or "\n\n".join(
        str(rec[k]) for k in ("prompt", "response") if rec.get(k)
    )


def _token_details(
    run: Run, ev: Evidence, records: dict[int, dict[str, Any]], options: DescribeOptions
) -> tuple[dict[int, Any], dict[str, Any]]:
    """Per-token activations of every top row (one reader, all requested concepts at once)."""
    if not options.tokens:
        return {}, {"available": False, "reason": "disabled (--no-tokens)"}
    settings = read_settings(run)
    if isinstance(settings, str):
        return {}, {"available": False, "reason": settings}
    from cg_ray.activations.config import ReaderConfig
    from cg_ray.activations.reader import ConceptReader
    from cg_ray.activations.token_detail import read_tokens

    config = dict(settings.reader, **options.reader_overrides)
    if options.dtype:
        config["dtype"] = options.dtype
    started = time.perf_counter()
    reader = ConceptReader.from_config(ReaderConfig.model_validate(config))
    if reader.d_sae != run.rows.d_sae:
        return {}, {
            "available": False,
            "reason": f"the reader's d_sae {reader.d_sae} is not the run's {run.rows.d_sae}",
        }
    top_rows = sorted({r for c in ev.concept_ids for r, _ in ev.top[c]})
    texts: list[tuple[int, str, bool]] = []
    for r in top_rows:
        composed = row_text(records[r], settings, reader.tokenizer)
        if composed is not None:
            texts.append((r, *composed))
    details: dict[int, Any] = {}
    for add_special in (True, False):
        batch = [(r, t) for r, t, a in texts if a is add_special]
        if not batch:
            continue
        for (r, _), d in zip(
            batch,
            read_tokens(reader, [t for _, t in batch], ev.concept_ids, add_special_tokens=add_special),
            strict=True,
        ):
            details[r] = d
    check = reread_check(
        [
            (value, float(details[r].pooled()[j]))
            for j, c in enumerate(ev.concept_ids)
            for r, value in ev.top[c]
            if r in details
        ]
    )
    info = {
        "available": True,
        "settings_from": settings.source,
        "rows_reread": len(details),
        **check.as_dict(),
        "seconds": round(time.perf_counter() - started, 2),
        "dtype": str(reader.dtype).removeprefix("torch."),
    }
    if check.mismatch:
        log.warning("%s", check.message())
    return details, info


def explanation_candidates(run: RunDir, table: pa.Table | None = None) -> dict[int, list[Candidate]]:
    """The scored candidates of `cg-ray explain`: `table` (being written now), else the run's file."""
    table = table if table is not None else run.read_table(O.EXPLANATIONS_FILE)
    if table is None:
        return {}
    out: dict[int, list[Candidate]] = {}
    for r in table.to_pylist():
        out.setdefault(int(r["concept_id"]), []).append(
            Candidate(
                r["source"],
                r["description"],
                True,
                r["detection_score"],
                r.get("fuzzing_score"),
                r.get("heldout_detection_score"),
            )
        )
    return out


def profile_terms(run: RunDir) -> dict[int, list[str]]:
    """concept → the distinctive terms of its rows, from the profile files that carry them."""
    out: dict[int, list[str]] = {}
    for name in S.PROFILE_FILES:
        path = run / name
        if path.is_file() and "terms" in pq.read_schema(path).names:
            for r in pq.read_table(path, columns=["concept_id", "terms"]).to_pylist():
                if r["terms"]:
                    out.setdefault(int(r["concept_id"]), list(r["terms"]))
    return out


def build_outputs(
    a: Analysis, options: DescribeOptions, explanations: pa.Table | None = None
) -> tuple[pa.Table, dict[str, Any]]:
    explained = explanation_candidates(a.run.dir, explanations)
    terms = profile_terms(a.run.dir)
    rows: list[dict[str, Any]] = []
    texts: dict[int, str] = {}
    enrich_text: dict[int, list[str]] = {}
    for c in a.evidence.concept_ids:
        ce = a.per_concept[c]
        concept = a.run.concepts[c]
        d = describe_concept(c, a.facts(c, terms), explained.get(c, []))
        texts[c] = d.text
        enrich_text[c] = [e.text() for e in ce.enriched]
        rows.append(
            {
                "concept_id": c,
                "description": d.text,
                "source": d.source,
                "metadata_enrichment": enrich_text[c],
                "top_ngrams": ce.spans,
                "top_tokens": ce.tokens,
                "detection_score": d.detection_score,
                "label": concept.get("label"),
                "reasons": a.reasons.get(c, []),
                "X_model": concept.get("X_model"),
                "X_bench": concept.get("X_bench"),
                "n_active_rows": a.evidence.n_active[c],
                "mean_score_active": a.evidence.mean_score_active[c],
                "examples": json.dumps(ce.examples, ensure_ascii=False),
            }
        )
    table = pa.Table.from_pylist(rows, schema=S.DESCRIPTIONS_SCHEMA)
    return table, _themes(a, options, texts, enrich_text, explanations is not None)


def _themes(
    a: Analysis, options: DescribeOptions, texts: dict[int, str], enrich_text: dict[int, list[str]], explained: bool
) -> dict[str, Any]:
    ev = a.evidence
    order = sorted(range(len(ev.concept_ids)), key=lambda i: -ev.n_active[ev.concept_ids[i]])
    groups = group(ev.co_active, options.min_jaccard)
    member_lists = [sorted((ev.concept_ids[i] for i in g), key=lambda c: -ev.n_active[c]) for g in groups]
    stats = theme_rows(a.run.rows, member_lists)
    extra = read_rows(a.run.rows, {r for s in stats for r, _ in s.representative} - set(a.records))
    records = {**a.records, **extra}
    themes = []
    for members, st in zip(member_lists, stats, strict=True):
        themes.append(
            {
                "name": theme_name(members, enrich_text, texts),
                "named_by": "enrichment/descriptions",
                "concepts": [{"concept_id": c, "description": texts[c]} for c in members],
                "support": st.support,
                "mean_score": st.mean_score,
                "representative_rows": [
                    {
                        "row_id": records[r].get("row_id"),
                        "benchmark": records[r].get("benchmark"),
                        "score": records[r].get("score"),
                        "members_s_tilde": round(v, 6),
                        "snippet": snippet(plain_text(records[r], a.text_mode), None, 200)[0],
                    }
                    for r, v in st.representative
                ],
            }
        )
    themed = {c for m in member_lists for c in m}
    return {
        "format_version": FORMAT_VERSION,
        "method": {
            "similarity": "Jaccard of active-row sets",
            "linkage": "average (scipy.cluster.hierarchy)",
            "min_jaccard": options.min_jaccard,
            "min_members": 2,
        },
        "themes": themes,
        "unthemed": [ev.concept_ids[i] for i in order if ev.concept_ids[i] not in themed],
        "reader_unknown": a.reader_unknown,  # why the reader is not known (spans not re-read), or null
        "summary": {
            "n_concepts": len(ev.concept_ids),
            "n_rows": ev.n_rows,
            "mean_score": ev.mean_score,
            "metadata_fields": {
                "analysed": sorted(ev.value_rows),
                "skipped": ev.skipped_fields,
            },
            "enrichment": {
                "test": "one-sided hypergeometric, Benjamini-Hochberg across the suite",
                "alpha": options.alpha,
            },
            "token_detail": a.token_detail,
            "explanations": explained or a.run.dir.has(O.EXPLANATIONS_FILE),
            "seed": options.seed,
        },
    }


def describe_run(
    run: RunDir,
    options: DescribeOptions,
) -> tuple[pa.Table, dict[str, Any]]:
    analysis = analyse(run, options)
    table, themes = build_outputs(analysis, options)
    write_outputs(run, table, themes)
    return table, themes


def try_describe(run: RunDir, options: DescribeOptions) -> bool:
    """`describe_run` for callers that must not fail on it (the service): logs and returns False instead."""
    try:
        describe_run(run, options)
    except Exception as exc:  # descriptions are extras: the metrics they describe are already complete
        log.warning("no descriptions for %s: %s: %s", run, type(exc).__name__, exc)
        return False
    return True


def write_outputs(
    run: RunDir,
    table: pa.Table,
    themes: dict[str, Any],
    step: str = "describe",
    more: dict[str, Content] | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """descriptions.parquet, themes.json and the profiles rewritten with them (`more` files too) in one
    post-publish step of the run: each replaced atomically, the step recorded in manifest.json, and the run's
    report (when it has one) rebuilt by that step to show them."""
    from cg_ray.profile.descriptions import described_profiles

    files: dict[str, Content] = {**(more or {}), O.DESCRIPTIONS_FILE: table, O.THEMES_FILE: themes}
    files.update(described_profiles(run, table))  # the profiles' `description` / `metadata_enrichment`
    run.update(step, files, {"concepts": table.num_rows, **(details or {})})
