"""`cg-ray probe RUN_DIR`: write item pairs for each gap, check them, have the model answer them, and judge
each gap on them (docs/probe.md). The steps, in order:

1. **write**: per gap, target items that exhibit it and matched controls without it (`generators.py`: an
   LLM writer; `families.py`: programmatic families where it cannot express a gap, or instead of it);
2. **check**, before the model answers anything: references (in the writer), near copies of the suite's
   rows or of each other (`dedupe.py`; a family's items, drawn from the suite's own templates, only for
   exact copies), and the reader (`reader_check.py`: the target shows the gap's concepts, the control not);
3. **answer**: the evaluated model through the pipeline's backends, scored by the item's scorer
   (`answer.py`); items are never chosen by how the model answered them;
4. **judge**: target − control per gap on this probe's fresh pairs, paired and cluster-aware, BH across the
   gaps it planned at its share of fdr (`confirm.py`, `power.share`);
5. **publish**: probe/items.parquet, probe/results.parquet, probe/summary.json and probe/export/ are
   written at once (`RunDir.update`), recorded in its manifest. They keep every attempt of the run's earlier
   probes as judged (final), and each gap's standing verdict (`history.py`).

Each step saves what it made in RUN_DIR/probe.work (`work.py`), so a killed probe resumes where it stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.protocol import reader_from_config
from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.probe import ProbeEntry
from cg_ray.probe.answer import Answer, Question, answer
from cg_ray.probe.checked import Checked
from cg_ray.probe.config import WORK_DIR
from cg_ray.probe.confirm import PROBE_DECISION, confirm_gaps
from cg_ray.probe.dedupe import near_copies
from cg_ray.probe.export import export_texts
from cg_ray.probe.families import is_family
from cg_ray.probe.generators import LLMGenerator
from cg_ray.probe.history import (
    Earlier,
    fdr_text,
    merged_items,
    merged_results,
    numbered_pairs,
    read_earlier,
    replanned_rows,
    this_probe,
    verified_pairs,
)
from cg_ray.probe.items import GenerationOutcome
from cg_ray.probe.ledger import open_ledger
from cg_ray.probe.plan import ProbePlan, plan_text
from cg_ray.probe.power import share
from cg_ray.probe.reader_check import check_pairs
from cg_ray.probe.tables import items_table, pair_scores, results_table
from cg_ray.probe.work import Work

log = logging.getLogger(__name__)
Say = Callable[[str], None]


def preflight(plan: ProbePlan, work: Work | None) -> LLMGenerator | None:
    """Every model the probe will call answers before the first request: the answering endpoint
    (`GET /models`), and the writer where a gap still needs one (its completer checks itself when built)."""
    if plan.model.backend == "endpoint":
        from cg_ray.generation.endpoint import check_endpoint

        check_endpoint(plan.model)
    cfg = plan.config
    needs = [g for g in plan.gaps if plan.writers[g.gap_id].llm and (work is None or work.written(g.gap_id) is None)]
    if not needs or cfg.writer is None:
        return None
    return LLMGenerator.from_config(cfg.writer, reference_check=cfg.reference_check)


def write_pairs(plan: ProbePlan, work: Work, writer: LLMGenerator | None, say: Say) -> Checked:
    """Step 1: each gap's pairs, from the work directory where an earlier attempt wrote them."""
    out = Checked()
    try:
        for n, gap in enumerate(plan.gaps, start=1):
            saved = work.written(gap.gap_id)
            if saved is None:
                saved = _write_one(plan, gap.gap_id, writer)
                work.save_written(gap.gap_id, *saved)
            outcome, generator = saved
            out.written[gap.gap_id], out.generator[gap.gap_id] = outcome, generator
            out.pairs += outcome.pairs
            lost = f" ({outcome.malformed} malformed, {outcome.wrong_reference} wrong references)"
            say(f"[{n}/{len(plan.gaps)}] {gap.gap_id}: {len(outcome.pairs)} pairs by {generator or 'nobody'}"
                + (lost if outcome.requests else "") + (f"; {outcome.note}" if outcome.note else ""))  # fmt: skip
    finally:
        if writer is not None:
            writer.close()
    return out


def _write_one(plan: ProbePlan, gap_id: str, writer: LLMGenerator | None) -> tuple[GenerationOutcome, str]:
    cfg = plan.config
    gap = next(g for g in plan.gaps if g.gap_id == gap_id)
    outcome, name, chosen = GenerationOutcome(), "", plan.writers[gap_id]
    if writer is not None and chosen.llm:
        outcome, name = writer.generate(gap, cfg.pairs, cfg.seed), writer.name
    family = chosen.family  # the plan's: a fitting family unless --families never
    if family is not None and (not outcome.pairs or (outcome.note and cfg.families == "fallback")):
        lost = outcome  # the writer's requests and what they lost stay counted
        outcome, name = family.generate(gap, cfg.pairs, cfg.seed), family.name
        outcome.writer_requests, outcome.malformed = lost.requests + lost.writer_requests, lost.malformed
        outcome.wrong_reference = lost.wrong_reference
        outcome.note = f"written by {family.name}" + (f" ({lost.note})" if lost.note else "")
    elif not name:
        outcome.note = "no writer and no family fits this gap"
    return outcome, name


def check(plan: ProbePlan, checked: Checked, say: Say) -> Checked:
    """Step 2: near copies, then the reader, on every pair written (dropped pairs are kept, with why)."""
    suite = pq.read_table(RunDir(plan.run).rows, columns=["prompt"]).column("prompt").to_pylist()
    for role in ("target", "control"):  # a control is its target's near copy by design: each role apart
        texts = [p.side(role)[0] for p in checked.pairs]
        seen = set(suite)
        for p, text, copy in zip(
            checked.pairs, texts, near_copies(texts, suite, threshold=plan.config.near_copy), strict=True
        ):
            # A family's items are drawn from the suite's own templates with new numbers: only a literal
            # copy counts (the n-gram check reads numbers as one token and would call every draw a copy).
            if is_family(p.generator):
                what = "a suite row or an earlier item" if text in seen else None
                seen.add(text)
            else:
                what = (
                    None
                    if copy is None
                    else (f"suite row {copy.index}" if copy.source == "suite" else f"item {copy.index}")
                )
                what = what and f"{what} ({copy.overlap:.0%} of its 5-grams)" if copy else None
            if what:
                checked.near.setdefault(p.pair_id, f"{role} copies {what}")
                checked.dropped.setdefault(p.pair_id, "near_copy")
    if plan.config.reader_check and checked.kept():
        say(f"reader check: {len(checked.kept())} pairs × 2 texts ({plan.reader.model}, SAE {plan.reader.sae})")
        reader = reader_from_config(plan.reader, plan.config.reader_factory)
        kept = checked.kept()
        for p, v in zip(kept, check_pairs(kept, plan.rules, reader), strict=True):
            checked.reader[p.pair_id] = v
            if not v.passed:
                checked.dropped[p.pair_id] = "reader"
    return checked


def answer_pairs(plan: ProbePlan, checked: Checked, work: Work, say: Say) -> dict[str, Answer]:
    """Step 3: the model answers both items of every kept pair."""
    questions = [
        Question(p.item_id(role), *p.side(role), p.scorer) for p in checked.kept() for role in ("target", "control")
    ]
    say(f"the model answers {len(questions)} items ({plan.model.model}, {plan.model.backend})")
    return answer(questions, plan.model, work.answers(), work.save_answers)


def run_probe(plan: ProbePlan, *, fresh: bool = False, replace: bool = False, say: Say = log.info) -> dict[str, Any]:
    """Every step of the module docstring; returns the published summary. `replace`: forget the run's
    earlier probes' attempts instead of keeping them (their numbers still count: history.py)."""
    say(plan_text(plan))
    ledger = open_ledger(RunDir(plan.run).rows, plan.gaps, plan.rules, plan.ledger_dir)
    ledger.check_fdr(plan.config.fdr)  # refused before anything is written
    work = Work(plan.run / WORK_DIR)
    settings = {"config": plan.config.model_dump(mode="json"), "gaps": [g.gap_id for g in plan.gaps]}
    resuming = work.resumes(settings, fresh=fresh)
    # The endpoints are checked before anything is written: a wrong URL leaves no work directory behind.
    writer = preflight(plan, work if resuming else None)
    work.begin(settings, fresh=fresh)
    if resuming:
        say(f"resuming the unfinished probe in {work.path}")
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    checked = write_pairs(plan, work, writer, say)
    seconds["write"], t = time.perf_counter() - t, time.perf_counter()
    check(plan, checked, say)
    seconds["check"], t = time.perf_counter() - t, time.perf_counter()
    answers = answer_pairs(plan, checked, work, say) if checked.kept() else {}
    seconds["answer"], t = time.perf_counter() - t, time.perf_counter()
    scores, unanswered = pair_scores(checked.kept(), answers)
    for pair_id in unanswered:
        checked.dropped[pair_id] = "no_answer"
    dropped = {
        g.gap_id: sum(p.gap_id == g.gap_id for p in checked.pairs if p.pair_id in checked.dropped) for g in plan.gaps
    }
    earlier = read_earlier(RunDir(plan.run), replace=replace)
    fdr = plan.config.fdr
    # The number is taken (and spent) now, before any verdict is seen: ledger.py.
    number = ledger.spend(earlier.next_probe(), fdr, plan.run, {g.gap_id: g.description for g in plan.gaps})
    level = f"{share(number):.3g} × fdr {fdr:g}"
    say(f"probe {number}: Benjamini–Hochberg at {level} over the {len(plan.gaps)} gaps it planned; {ledger.text()}")
    if note := fdr_text(earlier, fdr):
        say(note)
    effects = {g.gap_id: g.effect for g in plan.gaps}  # the family: every gap planned, fixed before any verdict
    inflation = {g.gap_id: g.inflation for g in plan.gaps}
    verdicts = confirm_gaps(scores, effects, dropped, fdr=fdr, probe=number, inflation=inflation)
    seconds["judge"] = time.perf_counter() - t
    summary = publish(plan, checked, answers, verdicts, seconds, earlier, this_probe(
        number, [g.gap_id for g in plan.gaps], plan.config.pairs, plan.config.seed, fdr, str(ledger.root),
        tuple(ledger.keys.values())))  # fmt: skip
    work.remove()
    return summary


def publish(
    plan: ProbePlan,
    checked: Checked,
    answers: dict[str, Answer],
    verdicts: list[Any],
    seconds: dict[str, float],
    earlier: Earlier,
    entry: ProbeEntry,
) -> dict[str, Any]:
    """Step 5: the probe's files, with every attempt of the `earlier` probes kept, replace the run's probe at
    once."""
    run, cfg = RunDir(plan.run), plan.config
    carried = replanned_rows(earlier, set(entry.gaps), entry.probe + 1, cfg.fdr)
    results = merged_results(results_table(plan, checked, verdicts), entry, carried)
    items = merged_items(items_table(checked, answers), entry.probe, earlier)
    files: dict[str, Any] = {L.PROBE_ITEMS: items, L.PROBE_RESULTS: results}
    exports: list[str] = []
    mine = numbered_pairs([p for p in checked.kept() if p.pair_id not in checked.dropped], entry.probe)
    verified = mine + verified_pairs(earlier.items)
    if verified:
        export_dir = run.file(f"{L.PROBE_EXPORT}/{S.PROBE_EXPORT_FILES['items']}").parent.resolve()
        for file, text in export_texts(verified, export_dir, name=S.PROBE_EXPORT_NAME).values():
            files[f"{L.PROBE_EXPORT}/{file}"] = text
            exports.append(file)
    summary = {
        "run": str(plan.run),
        "config": plan.config.model_dump(mode="json"),
        "gaps": results.to_pylist(),
        "requests": _requests(checked, answers),
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "decision": PROBE_DECISION,
        "exports": exports,
        "probes": [p.document() for p in (*earlier.probes, entry)],
    }
    files[L.PROBE_SUMMARY] = summary
    run.update("probe", files, {"probe": entry.probe, "gaps": len(plan.gaps), "attempts_kept": len(carried),
                                "pairs": len(checked.pairs), "answered": len(answers)})  # fmt: skip
    return summary


def _requests(checked: Checked, answers: dict[str, Answer]) -> dict[str, int]:
    written = checked.written.values()
    return {
        "writer": sum(o.requests for o in written if not any(is_family(p.generator) for p in o.pairs))
        + sum(o.writer_requests for o in written),
        "family_draws": sum(o.requests for o in written if any(is_family(p.generator) for p in o.pairs)),
        "malformed": sum(o.malformed for o in written),
        "wrong_reference": sum(o.wrong_reference for o in written),
        "model": len(answers),
    }
