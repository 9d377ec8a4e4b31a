"""`cg-ray augment RUN_DIR --benchmark B`: items in B's format for B's in-scope gaps (docs/augment.md). The
steps, in order:

1. **write**: per gap, items that exhibit its concept (`writer.py`: a chat model, one item per request,
   format and reference checked as they are read);
2. **check**: near copies of the run's rows or of each other, then the reader (`check.py`: the concept must
   fire on the item at scope's threshold);
3. **coverage**: B's figures with the kept items added, by scope's code (`coverage.py`): each targeted
   concept's state, B's in-scope coverage, and what the items pushed into over-representation;
4. **publish**: augment/items.parquet, coverage.parquet, summary.json and export/ at once (`RunDir.update`).
   The user's benchmark file is never touched: export/items.jsonl holds the kept items to add to it.

Each gap's items are saved in RUN_DIR/augment.work as they are written (`probe.work.Work`), so a killed
augment resumes without asking the writer for them again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from cg_ray.activations.protocol import Reader, reader_from_config
from cg_ray.artifacts.layout import RunDir
from cg_ray.augment.check import Checked, check_items
from cg_ray.augment.config import WORK_DIR
from cg_ray.augment.coverage import coverage_change
from cg_ray.augment.plan import AugmentPlan, plan_text
from cg_ray.augment.rows_after import row_view_change
from cg_ray.augment.tables import publish
from cg_ray.augment.writer import Item, Written, write_items
from cg_ray.errors import ConfigError
from cg_ray.probe.generators import LLMGenerator
from cg_ray.probe.work import Work
from cg_ray.report.scope import augment_rows_text

log = logging.getLogger(__name__)
Say = Callable[[str], None]
FOLDER = "items"  # the work directory's folder of written items, one file per gap


def preflight(plan: AugmentPlan, work: Work | None) -> tuple[LLMGenerator | None, Reader]:
    """The writer (where a gap still needs one: its completer checks the endpoint when built) and the reader,
    before anything is written: a wrong URL or reader leaves nothing behind."""
    cfg = plan.config
    needs = [t for t in plan.targets if work is None or work.load(FOLDER, t.gap_id) is None]
    writer = None
    if needs:
        if cfg.writer is None:
            raise ConfigError(
                "name the model that writes items: --writer-endpoint URL with --writer-model NAME "
                "(or --writer-model alone for a generation backend)"
            )
        writer = LLMGenerator.from_config(cfg.writer, reference_check=cfg.reference_check, overdraw=cfg.overdraw)
    reader = reader_from_config(plan.reader, cfg.reader_factory)
    d_sae = int(RunDir(plan.run).read_summary()["d_sae"])
    if reader.d_sae != d_sae:
        if writer is not None:
            writer.close()
        raise ConfigError(f"the reader has {reader.d_sae} concepts, the run's rows {d_sae}: name the run's reader")
    return writer, reader


def _saved(work: Work, gap_id: str) -> Written | None:
    data = work.load(FOLDER, gap_id)
    if data is None:
        return None
    items = [Item(**i) for i in data.pop("items")]
    return Written(items=items, **data)


def write_all(plan: AugmentPlan, work: Work, writer: LLMGenerator | None, say: Say) -> dict[int, Written]:
    out: dict[int, Written] = {}
    try:
        for n, t in enumerate(plan.targets, start=1):
            written = _saved(work, t.gap_id)
            if written is None:
                assert writer is not None  # preflight built one for every gap not yet written
                written = write_items(plan, t, writer)
                work.save(FOLDER, t.gap_id, asdict(written))
            out[t.concept_id] = written
            usable = sum(i.usable for i in written.items)
            bad = len(written.items) - usable
            say(f"[{n}/{len(plan.targets)}] {t.gap_id}: {usable} usable items of {written.requests} requests "
                f"({written.malformed} malformed, {bad} of wrong format or reference)")  # fmt: skip
    finally:
        if writer is not None:
            writer.close()
    return out


def run_augment(plan: AugmentPlan, *, fresh: bool = False, say: Say = log.info) -> dict[str, Any]:
    """Every step of the module docstring; returns the published summary."""
    say(plan_text(plan))
    work = Work(plan.run / WORK_DIR, what="augment")
    settings = {"config": plan.config.model_dump(mode="json"), "gaps": [t.gap_id for t in plan.targets]}
    resuming = work.resumes(settings, fresh=fresh)
    writer, reader = preflight(plan, work if resuming else None)
    work.begin(settings, fresh=fresh)
    if resuming:
        say(f"resuming the unfinished augment in {work.path}")
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    written = write_all(plan, work, writer, say)
    seconds["write"], t = time.perf_counter() - t, time.perf_counter()
    items = [i for w in written.values() for i in w.items]
    say(f"checks: {len(items)} items (near copies, then the reader: {reader.describe().get('model')})")
    checked: Checked = check_items(items, plan, suite_prompts(plan), reader)
    seconds["check"], t = time.perf_counter() - t, time.perf_counter()
    reads = [checked.read[i.item_id] for i in checked.kept()]
    change = coverage_change(plan, reads)
    rows = row_view_change(plan, reads)
    seconds["coverage"] = time.perf_counter() - t
    summary = publish(plan, written, checked, change, seconds, rows)
    work.remove()
    return summary


def suite_prompts(plan: AugmentPlan) -> list[str]:
    """Every prompt of the run's rows (the benchmark's own among them): an item must copy none."""
    import pyarrow.parquet as pq

    rows = RunDir(plan.run).rows
    if "prompt" not in pq.ParquetFile(rows).schema_arrow.names:
        return []
    return [p for p in pq.read_table(rows, columns=["prompt"]).column("prompt").to_pylist() if p]


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The lines `cg-ray augment` and the service's augment job print after the steps: per gap, coverage,
    over-representation, requests."""
    lines = []
    for g in summary["gaps"]:
        drops = ", ".join(f"{k} {g[k]}" for k in ("format", "wrong_reference", "near_copy", "reader") if g[k])
        lines.append(
            f"  {g['gap_id']:<14} {g['state_before']} → {g['state_after']}: {g['kept']} of {g['written']} items kept"
            f"{f' (dropped: {drops})' if drops else ''}; rows firing {g['bench_rows'][0]} → {g['bench_rows'][1]}"
        )
    cov = summary["coverage"]
    before, after = cov["in_scope_coverage"]
    lines.append(
        f"in-scope coverage of {summary['benchmark']}: {before:.1%} → {after:.1%} of the {cov['in_reference_use']} "
        f"concepts in the reference's use (gaps {cov['gaps'][0]} → {cov['gaps'][1]}, {cov['items_added']} items added)"
    )
    if rows := augment_rows_text(summary):  # the row view before → after, or why there is none
        lines.append(rows)
    for o in summary["over_represented"]:
        label = o["label"] or "(no label)"
        lines.append(f"  now over-represented in it (χ_bench ≥ its 90th percentile): concept {o['concept_id']} {label}")
    return [*lines, f"requests: {json.dumps(summary['requests'])}"]
