"""What an augment publishes, through the run's one writer (`RunDir.update`): augment/items.parquet (every
item written, with its checks), coverage.parquet (per targeted concept, before → after), summary.json, and
export/ — the kept items in the benchmark's normalized format (items.jsonl: {id, benchmark, prompt,
reference, choices, metadata}, loadable as a `normalized` source and appendable to the benchmark) and, where
its scorer has a harness equivalent, the probe's lm-eval and inspect_ai tasks over them (harness.jsonl)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.augment.check import REASONS, Checked
from cg_ray.augment.coverage import CoverageChange, coverage_frame
from cg_ray.augment.plan import AugmentPlan
from cg_ray.augment.rows_after import RowViewChange
from cg_ray.augment.writer import Item, Written
from cg_ray.errors import InputError
from cg_ray.probe.export import exportable_scorer, harness_texts

ABOUT = "cg-ray augment items: new items of {benchmark} for its in-scope gaps (concepts real use shows, it rarely)."


def items_table(plan: AugmentPlan, checked: Checked) -> pa.Table:
    labels = {t.concept_id: t.label for t in plan.targets}
    rows = [
        {
            "item_id": i.item_id,
            "benchmark": plan.benchmark,
            "concept_id": i.concept_id,
            "label": labels.get(i.concept_id),
            "generator": i.generator,
            "request_id": i.request_id,
            "seed": i.seed,
            "prompt": i.prompt,
            "reference": [i.reference] if i.reference else [],
            "choices": i.choices,
            "scorer": plan.scorer,
            "reference_ok": i.reference_ok,
            "near_copy": checked.near.get(i.item_id),
            "strength": checked.strength.get(i.item_id),
            "dropped": checked.dropped.get(i.item_id),
        }
        for i in checked.items
    ]
    return pa.Table.from_pylist(rows, schema=S.AUGMENT_ITEMS_SCHEMA)


def normalized(plan: AugmentPlan, item: Item) -> dict[str, Any]:
    """One kept item as a row of the benchmark's normalized format."""
    meta = {"source": "cg-ray augment", "concept_id": item.concept_id, "generator": item.generator,
            "request_id": item.request_id, "seed": item.seed, "reference_group": plan.reference}  # fmt: skip
    return {
        "id": f"{plan.benchmark}-augment-{item.item_id.replace(':', '-').replace('/', '-')}",
        "benchmark": plan.benchmark,
        "prompt": item.prompt,
        "reference": [item.reference] if item.reference else [],
        "choices": item.choices,
        "metadata": meta,
    }


def export_files(plan: AugmentPlan, kept: list[Item]) -> tuple[dict[str, str], str]:
    """artifact name -> text of every exported file, and a note where the harness tasks could not be made."""
    out_dir = RunDir(plan.run).file(f"{L.AUGMENT_EXPORT}/{S.AUGMENT_EXPORT_FILES['items']}").parent
    rows = [normalized(plan, i) for i in kept]
    files = {S.AUGMENT_EXPORT_FILES["items"]: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)}
    note = ""
    try:
        scorer = exportable_scorer(plan.scorer, 0)
    except InputError as exc:
        note = f"no harness tasks: {exc}"
    else:
        harness = [
            {"id": r["id"], "gap_id": f"concept:{i.concept_id}", "role": "item", "pair_id": r["id"],
             "input": i.text, "target": i.reference, "scorer": scorer}
            for r, i in zip(rows, kept, strict=True)
        ]  # fmt: skip
        texts = harness_texts(harness, Path(out_dir).resolve(), name=S.AUGMENT_EXPORT_NAME, roles=("item",),
                              items_file=S.AUGMENT_EXPORT_FILES["harness"],
                              about=ABOUT.format(benchmark=plan.benchmark))  # fmt: skip
        files.update(dict(texts.values()))
    return {f"{L.AUGMENT_EXPORT}/{name}": text for name, text in files.items()}, note


def summary_doc(
    plan: AugmentPlan,
    written: Mapping[int, Written],
    checked: Checked,
    change: CoverageChange,
    seconds: dict[str, float],
    exports: list[str],
) -> dict[str, Any]:
    gaps = []
    for t in plan.targets:
        counts = checked.counts(t.concept_id)
        b, a = change.row(t.concept_id, change.before), change.row(t.concept_id, change.after)
        gaps.append(
            {
                "gap_id": t.gap_id,
                "label": t.label,
                "requests": written[t.concept_id].requests,
                "malformed": written[t.concept_id].malformed,
                **counts,
                "state_before": change.state(t.concept_id, change.before),
                "state_after": change.state(t.concept_id, change.after),
                "bench_rows": [int(b["bench_rows"]), int(a["bench_rows"])],
                "bench_share": [float(b["bench_share"]), float(a["bench_share"])],
                "reference_share": float(b["reference_share"]),
            }
        )
    before, after = change.before.table, change.after.table
    labels = {
        int(c): lab if isinstance(lab, str) else None
        for c, lab in zip(plan.scope["concept_id"], plan.scope["label"], strict=True)
    }
    return {
        "run": str(plan.run), "benchmark": plan.benchmark, "reference": plan.reference,
        "config": plan.config.model_dump(mode="json", exclude={"writer": {"api_key_env"}}),
        "gaps": gaps,
        "coverage": {
            "in_reference_use": int(before["in_reference"].sum()),
            "gaps": [int(before["gap"].sum()), int(after["gap"].sum())],
            "in_scope_coverage": [change.in_scope(change.before), change.in_scope(change.after)],
            "rows": [change.before.n_bench, change.after.n_bench], "items_added": change.n_items,
        },
        "over_represented": [
            {"concept_id": c, "label": labels.get(c), "chi_bench": [float(change.chi_before[c]),
             float(change.chi_after[c])]} for c in change.over_represented()
        ],
        "requests": {
            "writer": sum(w.requests for w in written.values()),
            "malformed": sum(w.malformed for w in written.values()),
            "dropped": {r: sum(v == r for v in checked.dropped.values()) for r in REASONS},
        },
        "exports": exports,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
    }  # fmt: skip


def publish(
    plan: AugmentPlan,
    written: Mapping[int, Written],
    checked: Checked,
    change: CoverageChange,
    seconds: dict[str, float],
    rows: RowViewChange | str,
) -> dict[str, Any]:
    """Publish items, coverage, export and summary.json at once; `rows`: the row view before → after, or why
    there is none."""
    kept = checked.kept()
    exports, note = export_files(plan, kept)
    counts = {t.concept_id: checked.counts(t.concept_id) for t in plan.targets}
    coverage = pa.Table.from_pandas(coverage_frame(plan, change, counts), schema=S.AUGMENT_COVERAGE_SCHEMA,
                                    preserve_index=False)  # fmt: skip
    summary = summary_doc(plan, written, checked, change, seconds, [n.rsplit("/", 1)[-1] for n in exports])
    if note:
        summary["export_note"] = note
    summary["row_view"] = rows.as_dict() if isinstance(rows, RowViewChange) else None
    if isinstance(rows, str):
        summary["row_view_note"] = rows
    files: dict[str, L.Content] = {L.AUGMENT_ITEMS: items_table(plan, checked), L.AUGMENT_COVERAGE: coverage}
    files.update(exports)
    files[L.AUGMENT_SUMMARY] = summary
    RunDir(plan.run).update(
        "augment", files, {"benchmark": plan.benchmark, "gaps": len(plan.targets), "items_kept": len(kept)}
    )
    return summary
