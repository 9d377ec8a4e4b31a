"""`cg-ray explain RUN_DIR`: LLM explanations of concepts, scored by detection.

An instruct model (default SmolLM2-135M-Instruct, through the project's generation backend: vLLM on
`ray.data`) reads a concept's top in-suite examples with the activating span marked and writes one
sentence. Every candidate description of the concept (the LLM's, and the label / enrichment / in-suite
token sentences `cg-ray describe` would use) is then scored the way auto-interpretability work scores
explanations: given the description, the same model judges held-out rows that exhibit the concept (a
seeded random sample of active rows, never the examples it saw) and rows that do not (a seeded random
sample of all rows where the concept is inactive); the score is the balanced accuracy (0.5 = chance).
Greedy decoding and seeded row choice make a run reproducible. `describe` then prefers the LLM's sentence
only when it scores at least 0.6 and at least as well as the other candidates.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray.artifacts.publish import atomic_file
from cg_ray.describe import outputs as O
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.descriptions import enrichment_candidate, label_candidate, ngram_candidate
from cg_ray.describe.prompts import (
    detect_prompt,
    explain_prompt,
    parse_explanation,
    parse_judgement,
    parse_theme_name,
    theme_prompt,
)
from cg_ray.describe.run import Analysis, DescribeOptions, analyse, build_outputs, write_outputs
from cg_ray.describe.spans import marked
from cg_ray.errors import ConfigError

log = logging.getLogger(__name__)


class Completer(Protocol):
    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]: ...


def check_model(config: ExplainConfig) -> None:
    """Fail before any work when the explainer cannot be loaded."""
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


class BackendCompleter:
    """Prompts through the generation backend (`cg_ray.generation`) on a local Ray instance."""

    def __init__(self, config: ExplainConfig) -> None:
        self.config = config

    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]:
        import ray
        import ray.data

        from cg_ray.benchmarks.rows import make_row, rows_table
        from cg_ray.generation import make_generator
        from cg_ray.generation.config import GenerationConfig

        if not prompts:
            return []
        gen = GenerationConfig.model_validate(
            {
                "backend": self.config.backend,
                "model": self.config.model,
                "sampling": {"max_tokens": max_tokens, "temperature": 0.0, "seed": self.config.seed},
                "engine": {"dtype": self.config.dtype, "max_model_len": 2048},
                "resources": {"num_cpus": 1, "batch_size": 32},
            }
        )
        if not ray.is_initialized():
            from cg_ray.generation.local_ray import start_local_ray

            start_local_ray(gen, log_to_driver=True)  # as `cg-ray run` does, engine thread binding included
        rows = [
            make_row(row_id=f"p{i:06d}", benchmark="explain", prompt=p, scorer="exact") for i, p in enumerate(prompts)
        ]
        out = make_generator(gen).generate(ray.data.from_arrow(rows_table(rows)))
        answers = {r["row_id"]: r["response"] or "" for r in out.take_all()}
        return [answers[f"p{i:06d}"] for i in range(len(prompts))]


def balanced_accuracy(on_positive: Sequence[bool | None], on_negative: Sequence[bool | None]) -> float | None:
    """(TPR + TNR) / 2; an unparsed answer counts as wrong in both classes."""
    if not on_positive or not on_negative:
        return None
    tpr = sum(1 for p in on_positive if p is True) / len(on_positive)
    tnr = sum(1 for p in on_negative if p is False) / len(on_negative)
    return (tpr + tnr) / 2


def held_out(a: Analysis, concept: int, n: int, seed: int) -> tuple[list[str], list[str]]:
    """Texts of rows with the concept (not among its shown examples) and without it, seeded."""
    rng = np.random.default_rng([seed, concept])
    shown = {r for r, _ in a.evidence.top[concept]}
    pos = [r for r in a.evidence.sample[concept] if r not in shown]
    neg = [r for r, active in a.evidence.background if concept not in active]
    pick_p = sorted(rng.choice(pos, size=min(n, len(pos)), replace=False).tolist()) if pos else []
    pick_n = sorted(rng.choice(neg, size=min(n, len(neg)), replace=False).tolist()) if neg else []
    return [a.text_of(r) for r in pick_p], [a.text_of(r) for r in pick_n]


def explain(a: Analysis, completer: Completer, config: ExplainConfig) -> list[dict[str, Any]]:
    """Explanations and the detection score of every candidate description, one record per candidate."""
    concepts = a.evidence.concept_ids
    shown = {
        c: [
            marked(e["snippet"], e["span_start"], e["span_end"]) for e in a.per_concept[c].examples[: config.n_examples]
        ]
        for c in concepts
    }
    answers = completer.complete([explain_prompt(shown[c]) for c in concepts], config.explain_tokens)
    candidates: dict[int, list[tuple[str, str, str]]] = {}  # concept → (source, text, parse)
    raw: dict[int, str] = {}
    for c, answer in zip(concepts, answers, strict=True):
        text, how = parse_explanation(answer)
        ce = a.per_concept[c]
        raw[c] = answer
        found: list[tuple[str, str, str]] = [("llm", text, str(how))] if text else []
        for cand in (
            label_candidate(a.run.concepts[c].get("label")),
            enrichment_candidate(ce.enriched),
            ngram_candidate(ce.spans, ce.tokens),
        ):
            if cand is not None:
                found.append((cand.source, cand.text, "-"))
        candidates[c] = found
        if not text:
            log.info("concept %d: the explanation could not be parsed: %r", c, answer[:120])
    jobs: list[tuple[int, int, bool]] = []  # (concept, candidate index, positive?)
    prompts: list[str] = []
    for c in concepts:
        pos, neg = held_out(a, c, config.n_detect, config.seed)
        for i, (_source, text, _how) in enumerate(candidates[c]):
            for texts, label in ((pos, True), (neg, False)):
                for t in texts:
                    jobs.append((c, i, label))
                    prompts.append(detect_prompt(text, t))
    judged = completer.complete(prompts, config.detect_tokens)
    votes: dict[tuple[int, int], tuple[list[bool | None], list[bool | None]]] = {}
    first_answer: dict[tuple[int, int], str] = {}
    for (c, i, label), answer in zip(jobs, judged, strict=True):
        first_answer.setdefault((c, i), answer)
        pos_v, neg_v = votes.setdefault((c, i), ([], []))
        (pos_v if label else neg_v).append(parse_judgement(answer))
    records = []
    for c in concepts:
        for i, (source, text, parsed) in enumerate(candidates[c]):
            pos_v, neg_v = votes.get((c, i), ([], []))
            records.append(
                {
                    "concept_id": c,
                    "source": source,
                    "description": text,
                    "detection_score": balanced_accuracy(pos_v, neg_v),
                    "n_positive": len(pos_v),
                    "n_negative": len(neg_v),
                    "n_unparsed": sum(1 for v in (*pos_v, *neg_v) if v is None),
                    "parse": parsed,
                    "raw_explanation": raw[c] if source == "llm" else None,
                    "first_judgement": first_answer.get((c, i)),
                    "model": config.model,
                    "seed": config.seed,
                }
            )
    return records


def explain_run(
    run_dir: Path, options: DescribeOptions, config: ExplainConfig, completer: Completer | None = None
) -> tuple[pa.Table, dict[str, Any]]:
    if completer is None:
        check_model(config)  # before any work
        completer = BackendCompleter(config)
    a = analyse(run_dir, options)
    table = pa.Table.from_pylist(explain(a, completer, config), schema=O.EXPLANATIONS_SCHEMA)
    with atomic_file(run_dir / O.EXPLANATIONS_FILE) as tmp:
        pq.write_table(table, tmp)
    descriptions, themes = build_outputs(a, options)
    if config.name_themes:
        name_themes(themes, completer, config)
    write_outputs(run_dir, descriptions, themes)
    return descriptions, themes


def name_themes(themes: dict[str, Any], completer: Completer, config: ExplainConfig) -> None:
    """Replace each theme's name by the model's when it answers with a valid name (else keep the old one)."""
    items = themes["themes"]
    answers = completer.complete([theme_prompt([c["description"] for c in t["concepts"]]) for t in items], 24)
    for theme, answer in zip(items, answers, strict=True):
        name = parse_theme_name(answer)
        if name:
            theme["name"], theme["named_by"] = name, f"llm:{config.model}"
