"""`cg-ray explain RUN_DIR`: LLM explanations of concepts and failure modes, scored by detection and fuzzing.

An instruct model (through the project's generation backend or an OpenAI-compatible endpoint,
`describe/completers.py`) reads a concept's top in-suite examples with the activating span marked and writes
one sentence. Every candidate description (the LLM's, and the label / terms / enrichment / in-suite token
sentences `cg-ray describe` would use) is then judged the way auto-interpretability work does
(`describe/judging.py`): several examples per prompt, each a window of about 32 tokens around the row's
strongest activation of the concept, held-out rows with and without it (detection) and the activating span
against other words marked (fuzzing). The candidates are compared on one half of the rows; the winner — the
LLM's sentence when its detection is at least 0.6 and at least every other candidate's, else the offline
order of `describe` — is judged again on the other half, and that score is the one reported. The judge may be
another model than the explainer (`judge_*`). By default only what the report shows first is explained (the
weakness and coverage-gap lists, the confirmed failure modes); the plan — requests, tokens, time — is
announced before the first request and `max_requests` caps it. Greedy decoding and seeded row choice make a
run reproducible.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.describe import outputs as O
from cg_ray.describe.completers import Completer, close, make_completer
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.descriptions import Candidate, choose, offline_candidates
from cg_ray.describe.endpoint import duration
from cg_ray.describe.explain_modes import ModeWork, mode_outputs, prepare_modes
from cg_ray.describe.fuzzing import SpanReader, held_out_examples, reader_spans
from cg_ray.describe.judging import (
    Budget,
    JudgeStats,
    Scores,
    Subject,
    halves,
    planned,
    score_subjects,
)
from cg_ray.describe.prompts import explain_prompt, parse_explanation, parse_theme_name, theme_prompt
from cg_ray.describe.run import Analysis, DescribeOptions, analyse, build_outputs, profile_terms, write_outputs
from cg_ray.describe.saved import WORK_DIR, SavedAnswers
from cg_ray.describe.spans import marked

log = logging.getLogger(__name__)
# the LLM's sentence in the plan, made before it is written: words, so that a tokenizer counts it as one
PLACEHOLDER = "Texts that mention a particular kind of thing, written in a particular way or form."


def held_out_rows(a: Analysis, concept: int, n: int, seed: int) -> tuple[list[int], list[int]]:
    """Rows with the concept (not among its shown examples) and without it, seeded."""
    rng = np.random.default_rng([seed, concept])
    shown = {r for r, _ in a.evidence.top[concept]}
    pos = [r for r in a.evidence.sample[concept] if r not in shown]
    neg = [r for r, active in a.evidence.background if concept not in active]
    pick_p = sorted(rng.choice(pos, size=min(n, len(pos)), replace=False).tolist()) if pos else []
    pick_n = sorted(rng.choice(neg, size=min(n, len(neg)), replace=False).tolist()) if neg else []
    return pick_p, pick_n


Offline = dict[tuple[int, ...], list[Candidate]]  # the candidates besides the LLM's, per subject


def _concepts(
    a: Analysis, config: ExplainConfig, read_windows: SpanReader, offline_of: Offline
) -> tuple[list[Subject], list[str], float]:
    """Per concept: its offline candidates (into `offline_of`) and held-out examples (select / report
    halves); its explanation prompt; and the share of held-out active rows seen through a token window."""
    rows = {c: held_out_rows(a, c, config.detect_rows, config.seed) for c in a.evidence.concept_ids}
    windows = read_windows(a, {c: pos for c, (pos, _) in rows.items()})
    terms = profile_terms(a.run.dir)
    subjects, prompts = [], []
    for c in a.evidence.concept_ids:
        ce = a.per_concept[c]
        offline = offline_candidates(a.facts(c, terms))
        pos, neg = rows[c]
        own = {r: windows[(c, r)] for r in pos if (c, r) in windows}
        key = (config.seed, 0, c)
        offline_of[key] = offline
        (sel_p, rep_p), (sel_n, rep_n) = halves(pos, (*key, 1)), halves(neg, (*key, 2))
        subjects.append(
            Subject(
                key,
                [o.text for o in offline],
                held_out_examples(a, sel_p, sel_n, own, config, (*key, 3)),
                held_out_examples(a, rep_p, rep_n, own, config, (*key, 4)),
                [o.source for o in offline],
            )
        )
        shown = [marked(e["snippet"], e["span_start"], e["span_end"]) for e in ce.examples[: config.n_examples]]
        prompts.append(explain_prompt(shown))
    n_pos = sum(len(pos) for pos, _ in rows.values())
    return subjects, prompts, (len(windows) / n_pos if n_pos else 0.0)


def with_llm(s: Subject, text: str | None) -> Subject:
    if text is None:
        return s
    return replace(s, candidates=[text, *s.candidates], sources=["llm", *s.sources])


def prompt_counter(config: ExplainConfig) -> tuple[Callable[[str], int], str]:
    """(prompt -> its tokens, how they are counted): `config.tokenizer` with its chat template as the endpoint
    applies it, else CHARS_PER_TOKEN characters a token (1.6× low on the demo's judge prompts: docs/explainer.md)."""
    from cg_ray.generation.base import CHARS_PER_TOKEN, estimated_tokens, token_counter

    if config.tokenizer is None:
        return estimated_tokens, f"{CHARS_PER_TOKEN} characters a token; --tokenizer to count them"
    counted_by = f"counted with the tokenizer of {config.tokenizer}"
    return token_counter(config.tokenizer, setting="explain.tokenizer (--tokenizer)"), counted_by


def make_plan(
    subjects: Sequence[Subject],
    prompts: Sequence[str],
    config: ExplainConfig,
    counter: tuple[Callable[[str], int], str],
) -> dict[str, Any]:
    """Requests (explanations + judge prompts, before any fallback), tokens (by `counter`: `prompt_counter`) and
    time, every explanation assumed readable (its sentence judged too)."""
    count, counted_by = counter
    n_judge, judge_tokens, completion = planned([with_llm(s, PLACEHOLDER) for s in subjects], config, count)
    requests = len(prompts) + n_judge
    per_row = sum((len(s.candidates) + 1) * (s.select.size + s.report.size) for s in subjects)
    return {
        "one_per_request": len(prompts) + per_row,  # every candidate on every row, one example a request
        "requests": requests,
        "explanations": len(prompts),
        "judge_prompts": n_judge,
        "prompt_tokens_est": sum(map(count, prompts)) + judge_tokens,
        "prompt_tokens_counted_by": counted_by,
        "completion_tokens_max": len(prompts) * config.explain_tokens + completion,
        "seconds_est": round(requests / config.expected_rate),
        "expected_rate": config.expected_rate,
    }


def plan_line(plan: dict[str, Any], n_concepts: int, n_modes: int, config: ExplainConfig) -> str:
    return (
        f"plan: {n_concepts} concepts and {n_modes} failure modes: {plan['requests']:,} requests "
        f"({plan['explanations']} explanations + {plan['judge_prompts']:,} judge prompts of up to "
        f"{config.judge_batch} examples), about {plan['prompt_tokens_est']:,} prompt tokens "
        f"({plan['prompt_tokens_counted_by']}) + at most "
        f"{plan['completion_tokens_max']:,} completion tokens; about {duration(plan['seconds_est'])} at "
        f"{config.expected_rate:g} requests/s (--expected-rate)"
    )


def pick_by(cands: Offline) -> Callable[[Subject, list[Scores]], int | None]:
    """`describe`'s choice (`descriptions.choose`) on the select-half scores, as an index."""

    def pick(s: Subject, scores: list[Scores]) -> int | None:
        scored = [
            replace(c, detection_score=x.detection, fuzzing_score=x.fuzzing)
            for c, x in zip(cands[s.key], scores, strict=True)
        ]
        best = choose(scored)
        return None if best is None else next(i for i, c in enumerate(scored) if c is best)

    return pick


def explain_run(
    run: RunDir,
    options: DescribeOptions,
    config: ExplainConfig,
    completer: Completer | None = None,
    span_reader: SpanReader | None = None,
    *,
    judge: Completer | None = None,
    scope_all: bool = False,
    announce: Callable[[str], None] | None = None,
    fresh: bool = False,
) -> tuple[pa.Table, dict[str, Any]]:
    """Explain, judge and score the run's concepts and failure modes; write explanations.parquet, the
    explained modes, then descriptions / themes / profiles in one step (`themes.json` summary `explainer`:
    the plan, unreadable answers, the judging's parse rate, requests / tokens / cost from an endpoint).
    An endpoint's answers are saved in RUN_DIR/explain.work as they arrive (`describe/saved.py`) and reused by
    a rerun of a killed explain; `fresh` discards them first. The folder is removed once published."""
    announce = announce or log.info
    saved = SavedAnswers(run.path / WORK_DIR, fresh=fresh)
    if saved.found:
        announce(
            f"resuming: {saved.found} answers saved in {saved.path} by an unfinished explain; the same "
            "requests are not asked again (--fresh discards them)"
        )
    own: list[Completer] = []
    try:
        if completer is None:
            completer = make_completer(config, saved=saved)  # before any work
            own.append(completer)
        if judge is None:
            judge = make_completer(config.judge(), "judge", saved) if config.separate_judge else completer
            own += [judge] if judge is not completer else []
        published = _explain(run, options, config, completer, judge, span_reader, scope_all, announce)
    finally:
        close(*own)
    saved.remove()
    return published


def _explain(
    run_dir: RunDir,
    options: DescribeOptions,
    config: ExplainConfig,
    completer: Completer,
    judge: Completer,
    span_reader: SpanReader | None,
    scope_all: bool,
    announce: Callable[[str], None],
) -> tuple[pa.Table, dict[str, Any]]:
    counter = prompt_counter(config)  # a tokenizer that cannot be loaded fails here, before the reading
    # enough held-out active rows for `detect_rows` after the shown examples are set aside
    options = replace(
        options, sample=max(options.sample, config.detect_rows + options.examples), report_scope=not scope_all
    )
    a = analyse(run_dir, options)
    read_windows = span_reader or reader_spans(options, config.window_tokens)
    offline: Offline = {}
    subjects, prompts, windowed = _concepts(a, config, read_windows, offline)
    modes = prepare_modes(a, config, read_windows, scope_all, a.run.summary.get("model_filter"))
    offline.update({m.key: [Candidate("terms", m.candidates[0])] for m in modes.subjects})
    plan = make_plan(subjects + modes.subjects, prompts + modes.prompts, config, counter)
    announce(plan_line(plan, len(subjects), len(modes.subjects), config))
    budget = Budget(config.max_requests)
    budget.check(plan["requests"])
    answers = completer.complete(prompts + modes.prompts, config.explain_tokens)
    parsed = [parse_explanation(x) for x in answers]
    explained = [with_llm(s, text) for s, (text, _how) in zip(subjects + modes.subjects, parsed, strict=True)]
    cands = {
        s.key: ([Candidate("llm", text)] if text else []) + offline[s.key]
        for s, (text, _) in zip(explained, parsed, strict=True)
    }
    for s, (text, _how), answer in zip(explained, parsed, answers, strict=True):
        if text is None:
            log.info("%s: the explanation could not be parsed: %r", s.key, answer[:120])
    stats = JudgeStats()
    selected, heldout = score_subjects(explained, judge, config, budget, pick_by(cands), stats)
    n = len(subjects)
    records = _records(a, explained[:n], selected[:n], heldout[:n], parsed[:n], answers[:n], config)
    table = pa.Table.from_pylist(records, schema=S.EXPLANATIONS_SCHEMA)
    work = ModeWork(modes.table, modes.modes, modes.prompts, explained[n:], modes.reason)
    mode_summary, files = mode_outputs(work, selected[n:], heldout[n:], config.explainer)
    descriptions, themes = build_outputs(a, options, table)
    if config.name_themes:
        name_themes(themes, completer, config)
    summary = _summary(records, completer, judge, config)
    summary.update(plan=plan, judging=stats.as_dict(), windowed_rows=round(windowed, 4), failure_modes=mode_summary)
    themes["summary"]["explainer"] = summary
    # One post-publish step: the explanations, the explained modes, descriptions, themes and profiles.
    details = {**config.who(), "plan": plan, "judging": stats.as_dict()}
    write_outputs(run_dir, descriptions, themes, "explain", {**files, O.EXPLANATIONS_FILE: table}, details)
    return descriptions, themes


def _records(
    a: Analysis,
    subjects: Sequence[Subject],
    selected: Sequence[list[Scores]],
    heldout: Sequence[tuple[int, Scores] | None],
    parsed: Sequence[tuple[str | None, str]],
    answers: Sequence[str],
    config: ExplainConfig,
) -> list[dict[str, Any]]:
    records = []
    for c, s, sel, held, (_text, how), raw in zip(
        a.evidence.concept_ids, subjects, selected, heldout, parsed, answers, strict=True
    ):
        for i, (source, text) in enumerate(zip(s.sources, s.candidates, strict=True)):
            won = held[1] if held is not None and held[0] == i else None
            x = sel[i]
            records.append(
                {
                    "concept_id": c,
                    "source": source,
                    "description": text,
                    "detection_score": x.detection,
                    "fuzzing_score": x.fuzzing,
                    "heldout_detection_score": won.detection if won else None,
                    "heldout_fuzzing_score": won.fuzzing if won else None,
                    "n_positive": x.n_positive + (won.n_positive if won else 0),
                    "n_negative": x.n_negative + (won.n_negative if won else 0),
                    "n_fuzz": x.n_fuzz + (won.n_fuzz if won else 0),
                    "n_unparsed": x.n_unparsed + (won.n_unparsed if won else 0),
                    "parse": str(how) if source == "llm" else "-",
                    "raw_explanation": raw if source == "llm" else None,
                    "first_judgement": x.first_answer,
                    "model": config.explainer,
                    "seed": config.seed,
                }
            )
    return records


def _summary(
    records: Sequence[dict[str, Any]], completer: Completer, judge: Completer, config: ExplainConfig
) -> dict[str, Any]:
    """What the explainer and the judge did: unreadable answers, and requests / tokens / cost from an endpoint."""
    llm = [r for r in records if r["source"] == "llm"]
    judged_by = config.judge()
    out: dict[str, Any] = {
        "model": config.model,
        "endpoint": config.endpoint,
        "judge": {"model": judged_by.model, "endpoint": judged_by.endpoint},
        "n_detect": config.detect_rows,
        "judge_batch": config.judge_batch,
        "window_tokens": config.window_tokens,
        "seed": config.seed,
        "explanations": len(llm),
        "explanations_unreadable": len({r["concept_id"] for r in records}) - len(llm),
        "judgements": sum(r["n_positive"] + r["n_negative"] + r["n_fuzz"] for r in records),
        "judgements_unreadable": sum(r["n_unparsed"] for r in records),
        "fuzzed_candidates": sum(1 for r in records if r["fuzzing_score"] is not None),
    }
    for key, who in (("usage", completer), ("judge_usage", judge if judge is not completer else None)):
        report = getattr(who, "report", None)
        if callable(report):
            out[key] = report()
    return out


def name_themes(themes: dict[str, Any], completer: Completer, config: ExplainConfig) -> None:
    """Replace each theme's name by the model's when it answers with a valid name (else keep the old one)."""
    items = themes["themes"]
    answers = completer.complete([theme_prompt([c["description"] for c in t["concepts"]]) for t in items], 24)
    for theme, answer in zip(items, answers, strict=True):
        name = parse_theme_name(answer)
        if name:
            theme["name"], theme["named_by"] = name, f"llm:{config.model}"
