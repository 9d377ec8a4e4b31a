"""`cg-ray explain RUN_DIR`: LLM explanations of concepts, scored by detection and fuzzing.

An instruct model (default SmolLM2-135M-Instruct, through the project's generation backend: vLLM on
`ray.data`; or any model behind an OpenAI-compatible endpoint, `cg_ray.describe.endpoint`) reads a concept's
top in-suite examples with the activating span marked and writes one sentence. Every candidate description of
the concept (the LLM's, and the label / enrichment / in-suite token sentences `cg-ray describe` would use) is
then scored the way auto-interpretability work scores explanations: given the description, the same model
judges held-out rows that exhibit the concept (a seeded random sample of active rows, never the examples it
saw) and rows that do not (a seeded random sample of all rows where the concept is inactive); the score is the
balanced accuracy (0.5 = chance). Fuzzing (`describe/fuzzing.py`) is the second score and breaks ties. Greedy
decoding and seeded row choice make a run reproducible. `describe` then prefers the LLM's sentence only when
its detection score is at least 0.6 and at least that of every other candidate (ties: by fuzzing).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.describe import outputs as O
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.descriptions import (
    Candidate,
    enrichment_candidate,
    label_candidate,
    ngram_candidate,
    span_first,
)
from cg_ray.describe.explain_modes import mode_files
from cg_ray.describe.fuzzing import SpanReader, SpanTexts, fuzz_pairs, reader_spans
from cg_ray.describe.prompts import (
    balanced_accuracy,
    detect_prompt,
    explain_prompt,
    fuzz_prompt,
    parse_explanation,
    parse_judgement,
    parse_theme_name,
    theme_prompt,
)
from cg_ray.describe.run import Analysis, DescribeOptions, analyse, build_outputs, profile_terms, write_outputs
from cg_ray.describe.spans import marked
from cg_ray.errors import ConfigError

log = logging.getLogger(__name__)


class Completer(Protocol):
    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]: ...


def check_model(config: ExplainConfig) -> None:
    """Fail before any work when the explainer cannot be loaded (or its endpoint cannot be used)."""
    if config.endpoint:
        from cg_ray.describe.endpoint import EndpointCompleter

        completer = EndpointCompleter(config)
        try:
            completer.check()
        finally:
            completer.close()
        return
    from cg_ray.generation import GENERATORS

    if config.backend not in GENERATORS:
        raise ConfigError(GENERATORS.unknown_message(config.backend))
    if config.backend == "fake":
        return
    from cg_ray.catalog import KNOWN_MODELS, resolve_model

    try:
        path = resolve_model(config.model)
        if config.model not in KNOWN_MODELS:
            from transformers import AutoConfig

            AutoConfig.from_pretrained(str(path))
    except Exception as exc:  # any loading failure is reported the same way, up front
        raise ConfigError(f"explainer model {config.model!r} cannot be loaded: {exc}") from None


def backend_generation(config: ExplainConfig, max_tokens: int) -> Any:
    """The `GenerationConfig` of the explainer's backend: greedy, seeded; `engine` / `resources` override."""
    from cg_ray.generation.config import GenerationConfig

    return GenerationConfig.model_validate(
        {
            "backend": config.backend,
            "model": config.model,
            "sampling": {"max_tokens": max_tokens, "temperature": 0.0, "seed": config.seed},
            "engine": {"dtype": config.dtype, "max_model_len": 2048, **config.engine},
            "resources": {"num_cpus": 1, "batch_size": 32, **config.resources},
        }
    )


class BackendCompleter:
    """Prompts through the generation backend (`cg_ray.generation`) on a local Ray instance."""

    def __init__(self, config: ExplainConfig) -> None:
        self.config = config

    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]:
        import ray
        import ray.data

        from cg_ray.benchmarks.rows import make_row, rows_table
        from cg_ray.generation import make_generator

        if not prompts:
            return []
        gen = backend_generation(self.config, max_tokens)
        if not ray.is_initialized():
            if os.environ.get("RAY_ADDRESS"):  # a Ray job (`ray job submit`, jobs/explain_gpu.yaml): its cluster
                ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=True)
            else:
                from cg_ray.generation.local_ray import start_local_ray

                start_local_ray(gen, log_to_driver=True)  # as `cg-ray run` does, engine thread binding included
        rows = [
            make_row(row_id=f"p{i:06d}", benchmark="explain", prompt=p, scorer="exact") for i, p in enumerate(prompts)
        ]
        out = make_generator(gen).generate(ray.data.from_arrow(rows_table(rows)))
        answers = {r["row_id"]: r["response"] or "" for r in out.take_all()}
        return [answers[f"p{i:06d}"] for i in range(len(prompts))]


def held_out_rows(a: Analysis, concept: int, n: int, seed: int) -> tuple[list[int], list[int]]:
    """Rows with the concept (not among its shown examples) and without it, seeded."""
    rng = np.random.default_rng([seed, concept])
    shown = {r for r, _ in a.evidence.top[concept]}
    pos = [r for r in a.evidence.sample[concept] if r not in shown]
    neg = [r for r, active in a.evidence.background if concept not in active]
    pick_p = sorted(rng.choice(pos, size=min(n, len(pos)), replace=False).tolist()) if pos else []
    pick_n = sorted(rng.choice(neg, size=min(n, len(neg)), replace=False).tolist()) if neg else []
    return pick_p, pick_n


def held_out(a: Analysis, concept: int, n: int, seed: int) -> tuple[list[str], list[str]]:
    """Texts of rows with the concept (not among its shown examples) and without it, seeded."""
    pos, neg = held_out_rows(a, concept, n, seed)
    return [a.text_of(r) for r in pos], [a.text_of(r) for r in neg]


def terms_candidate(terms: Sequence[str], spans: Sequence[str]) -> Candidate | None:
    """The distinctive-terms sentence `describe_concept` builds, so that it is judged like the others."""
    return Candidate("terms", "Rows with " + ", ".join(f"“{t}”" for t in span_first(terms, spans))) if terms else None


Found = dict[int, list[tuple[str, str, str]]]  # concept → [(source, text, how the explanation was parsed)]


def _candidates(a: Analysis, completer: Completer, config: ExplainConfig) -> tuple[Found, dict[int, str]]:
    """One explanation request per concept (its marked top examples); every candidate description."""
    concepts = a.evidence.concept_ids
    shown = {
        c: [
            marked(e["snippet"], e["span_start"], e["span_end"]) for e in a.per_concept[c].examples[: config.n_examples]
        ]
        for c in concepts
    }
    answers = completer.complete([explain_prompt(shown[c]) for c in concepts], config.explain_tokens)
    candidates: Found = {}
    raw: dict[int, str] = {}
    terms = profile_terms(a.run.path)
    for c, answer in zip(concepts, answers, strict=True):
        text, how = parse_explanation(answer)
        ce = a.per_concept[c]
        raw[c] = answer
        found: list[tuple[str, str, str]] = [("llm", text, str(how))] if text else []
        adjusted = set(a.run.concepts[c].get("adjusted_for") or ())  # as describe_concept leaves them out
        for cand in (
            label_candidate(a.run.concepts[c].get("label")),
            terms_candidate(terms.get(c, ()), ce.spans),
            enrichment_candidate([e for e in ce.enriched if e.field not in adjusted]),
            ngram_candidate(ce.spans, ce.tokens),
        ):
            if cand is not None:
                found.append((cand.source, cand.text, "-"))
        candidates[c] = found
        if not text:
            log.info("concept %d: the explanation could not be parsed: %r", c, answer[:120])
    return candidates, raw


Votes = dict[tuple[str, int, int], tuple[list[bool | None], list[bool | None]]]


def _judge(
    a: Analysis, completer: Completer, config: ExplainConfig, candidates: Found, spans: SpanTexts
) -> tuple[Votes, dict[tuple[int, int], str]]:
    """One request per (candidate, held-out row): detection on active / inactive rows, fuzzing on active rows
    with the activating span or other words marked. Votes per (score, concept, candidate)."""
    jobs: list[tuple[str, int, int, bool]] = []  # (score, concept, candidate index, positive?)
    prompts: list[str] = []
    for c in a.evidence.concept_ids:
        pos_rows, neg_rows = held_out_rows(a, c, config.detect_rows, config.seed)
        pos, neg = [a.text_of(r) for r in pos_rows], [a.text_of(r) for r in neg_rows]
        right, wrong = fuzz_pairs(spans, c, pos_rows, config.seed) if config.fuzz else ([], [])
        for i, (_source, text, _how) in enumerate(candidates[c]):
            for texts, label in ((pos, True), (neg, False)):
                for t in texts:
                    jobs.append(("detection", c, i, label))
                    prompts.append(detect_prompt(text, t))
            for texts, label in ((right, True), (wrong, False)):
                for t in texts:
                    jobs.append(("fuzzing", c, i, label))
                    prompts.append(fuzz_prompt(text, t))
    judged = completer.complete(prompts, config.detect_tokens)
    votes: Votes = {}
    first_answer: dict[tuple[int, int], str] = {}
    for (score, c, i, label), answer in zip(jobs, judged, strict=True):
        if score == "detection":
            first_answer.setdefault((c, i), answer)
        pos_v, neg_v = votes.setdefault((score, c, i), ([], []))
        (pos_v if label else neg_v).append(parse_judgement(answer))
    return votes, first_answer


def explain(
    a: Analysis, completer: Completer, config: ExplainConfig, spans: SpanTexts | None = None
) -> list[dict[str, Any]]:
    """Explanations, the detection and fuzzing scores of every candidate description, one record each.

    `spans`: the activating span of held-out active rows per (concept, row), for fuzzing (none: no fuzzing)."""
    candidates, raw = _candidates(a, completer, config)
    votes, first_answer = _judge(a, completer, config, candidates, spans or {})
    records = []
    for c in a.evidence.concept_ids:
        for i, (source, text, parsed) in enumerate(candidates[c]):
            pos_v, neg_v = votes.get(("detection", c, i), ([], []))
            right_v, wrong_v = votes.get(("fuzzing", c, i), ([], []))
            records.append(
                {
                    "concept_id": c,
                    "source": source,
                    "description": text,
                    "detection_score": balanced_accuracy(pos_v, neg_v),
                    "fuzzing_score": balanced_accuracy(right_v, wrong_v),
                    "n_positive": len(pos_v),
                    "n_negative": len(neg_v),
                    "n_fuzz": len(right_v) + len(wrong_v),
                    "n_unparsed": sum(1 for v in (*pos_v, *neg_v, *right_v, *wrong_v) if v is None),
                    "parse": parsed,
                    "raw_explanation": raw[c] if source == "llm" else None,
                    "first_judgement": first_answer.get((c, i)),
                    "model": config.explainer,
                    "seed": config.seed,
                }
            )
    return records


def make_completer(config: ExplainConfig) -> Completer:
    """The explainer, checked before any work: the endpoint answers `GET /models`, or the model loads."""
    if config.endpoint:
        from cg_ray.describe.endpoint import EndpointCompleter

        completer = EndpointCompleter(config)
        completer.check()
        return completer
    check_model(config)
    return BackendCompleter(config)


def _summary(records: Sequence[dict[str, Any]], completer: Completer, config: ExplainConfig) -> dict[str, Any]:
    """What the explainer did: counts of unreadable answers, and requests / tokens / cost from an endpoint."""
    llm = [r for r in records if r["source"] == "llm"]
    out: dict[str, Any] = {
        "model": config.model,
        "endpoint": config.endpoint,
        "n_detect": config.detect_rows,
        "seed": config.seed,
        "explanations": len(llm),
        "explanations_unreadable": len({r["concept_id"] for r in records}) - len(llm),
        "judgements": sum(r["n_positive"] + r["n_negative"] + r["n_fuzz"] for r in records),
        "judgements_unreadable": sum(r["n_unparsed"] for r in records),
        "fuzzed_candidates": sum(1 for r in records if r["fuzzing_score"] is not None),
    }
    report = getattr(completer, "report", None)
    if callable(report):
        out["usage"] = report()
    return out


def explain_run(
    run_dir: Path,
    options: DescribeOptions,
    config: ExplainConfig,
    completer: Completer | None = None,
    span_reader: SpanReader | None = None,
) -> tuple[pa.Table, dict[str, Any]]:
    """Explain, judge and score the run's concepts; write explanations.parquet, then descriptions / themes
    (`themes.json` summary `explainer`: unreadable answers, and requests / tokens / cost from an endpoint)."""
    if completer is None:
        completer = make_completer(config)  # before any work
        try:
            return explain_run(run_dir, options, config, completer, span_reader)
        finally:
            close = getattr(completer, "close", None)
            if callable(close):
                close()
    # enough held-out active rows for `detect_rows` after the shown examples are set aside
    options = replace(options, sample=max(options.sample, config.detect_rows + options.examples))
    a = analyse(run_dir, options)
    spans: SpanTexts = {}
    if config.fuzz:
        wanted = {c: held_out_rows(a, c, config.detect_rows, config.seed)[0] for c in a.evidence.concept_ids}
        spans = (span_reader or reader_spans(options))(a, wanted)
    records = explain(a, completer, config, spans)
    table = pa.Table.from_pylist(records, schema=S.EXPLANATIONS_SCHEMA)
    modes, files = mode_files(run_dir, completer, config, a.run.summary.get("model_filter"))  # the failure modes
    descriptions, themes = build_outputs(a, options, table)
    if config.name_themes:
        name_themes(themes, completer, config)
    themes["summary"]["explainer"] = {**_summary(records, completer, config), "failure_modes": modes}
    # One post-publish step: the explanations, the explained modes, descriptions, themes and profiles.
    write_outputs(run_dir, descriptions, themes, "explain", {**files, O.EXPLANATIONS_FILE: table})
    return descriptions, themes


def name_themes(themes: dict[str, Any], completer: Completer, config: ExplainConfig) -> None:
    """Replace each theme's name by the model's when it answers with a valid name (else keep the old one)."""
    items = themes["themes"]
    answers = completer.complete([theme_prompt([c["description"] for c in t["concepts"]]) for t in items], 24)
    for theme, answer in zip(items, answers, strict=True):
        name = parse_theme_name(answer)
        if name:
            theme["name"], theme["named_by"] = name, f"llm:{config.model}"
