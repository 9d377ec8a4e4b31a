"""What `cg-ray diff` writes: diff.parquet (per concept), diff_benchmarks.parquet (per benchmark and
concept), diff.json (a versioned summary) and diff.html, published atomically into one directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cg_ray import __version__
from cg_ray import schemas as S
from cg_ray.artifacts.layout import DiffDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.compare.diff import DiffResult, eligible
from cg_ray.compare.entries import DiffBenchmark, DiffConcept, DiffInterval, HeldOutVerdict
from cg_ray.compare.runs import DiffRun
from cg_ray.profile.decision import DECISION, INTERVAL
from cg_ray.run_outputs import json_number, nullable_floats

KIND = "cg_ray.diff"


def _x_bench(run: DiffRun, d_sae: int) -> np.ndarray:
    out = np.zeros(d_sae)
    ids = run.concepts.column("concept_id").to_numpy()
    out[ids] = run.concepts.column("X_bench").to_numpy()
    return out


def diff_table(result: DiffResult) -> pa.Table:
    """One row per concept active in either run (its suite) or in the paired rows."""
    d = result.a.d_sae
    x_bench_a, x_bench_b = _x_bench(result.a, d), _x_bench(result.b, d)
    cols = result.concept_ids
    full: dict[str, np.ndarray] = {}
    delta = result.delta
    for name, values in (
        ("X_model_a", delta.x_a),
        ("X_model_b", delta.x_b),
        ("delta_X_model", delta.x_delta),
        ("delta_X_model_low", delta.x_low),
        ("delta_X_model_high", delta.x_high),
        ("relative_delta", delta.rel_delta),
        ("relative_low", delta.rel_low),
        ("relative_high", delta.rel_high),
    ):
        full[name] = np.full(d, np.nan)
        full[name][cols] = values
    counts: dict[str, np.ndarray] = {}
    for name, counted in (
        ("n_paired_active", result.n_active),
        ("n_active_a", result.n_active_a),
        ("n_active_b", result.n_active_b),
    ):
        counts[name] = np.zeros(d, dtype=np.int64)
        counts[name][cols] = counted
    direction = np.full(d, None, dtype=object)
    rank = np.full(d, np.nan)
    for key, order in (("regressed", result.regressed), ("improved", result.improved)):
        direction[cols[order]] = key
        rank[cols[order]] = np.arange(1, len(order) + 1)
    keep = np.zeros(d, dtype=bool)
    keep[cols] = True
    keep |= (x_bench_a > 0) | (x_bench_b > 0)
    ids = np.flatnonzero(keep)
    return pa.Table.from_arrays(
        [
            pa.array(ids.astype(np.int32)),
            pa.array([result.labels.get(int(c)) for c in ids], pa.string()),
            pa.array([result.descriptions.get(int(c)) for c in ids], pa.string()),
            *(pa.array(counts[n][ids]) for n in ("n_paired_active", "n_active_a", "n_active_b")),
            *(nullable_floats(full[n][ids]) for n in full),
            pa.array(direction[ids].tolist(), pa.string()),
            pa.array([None if np.isnan(r) else int(r) for r in rank[ids]], pa.int32()),
            pa.array(x_bench_a[ids]),
            pa.array(x_bench_b[ids]),
            pa.array(x_bench_b[ids] - x_bench_a[ids]),
        ],
        schema=S.DIFF_SCHEMA,
    )


def diff_benchmarks_table(result: DiffResult) -> pa.Table:
    b_idx, c_idx = np.nonzero(result.n_active_bench > 0)
    names = np.asarray(result.pairing.benchmarks, dtype=object)
    delta = result.delta
    return pa.Table.from_arrays(
        [
            pa.array(names[b_idx].tolist(), pa.string()),
            pa.array(result.concept_ids[c_idx].astype(np.int32)),
            pa.array(result.n_active_bench[b_idx, c_idx]),
            *(
                nullable_floats(values[b_idx, c_idx])
                for values in (delta.chi_a, delta.chi_b, delta.chi_delta, delta.chi_low, delta.chi_high)
            ),
        ],
        schema=S.DIFF_BENCHMARKS_SCHEMA,
    )


def _verdict(result: DiffResult, column: int, direction: str) -> HeldOutVerdict | None:
    found = dict(getattr(result.heldout, direction)).get(column)
    if found is None:
        return None
    fields = HeldOutVerdict.model_fields.keys() - {"direction", "same_rows_as"}
    same = result.heldout.same_rows[direction].get(column)
    return HeldOutVerdict(
        direction=direction,
        same_rows_as=None if same is None else int(result.concept_ids[same]),
        **{name: getattr(found, name) for name in fields},
    )


def concept_entry(result: DiffResult, column: int, direction: str) -> DiffConcept:
    """One listed concept: its change with the interval, per benchmark, the rows that flipped and its
    held-out verdict in `direction` (regressed / improved) where a split chose it."""
    c = int(result.concept_ids[column])
    delta = result.delta
    per_bench = [
        DiffBenchmark(
            benchmark=name,
            n_paired_active=int(result.n_active_bench[b, column]),
            delta_chi_model=json_number(delta.chi_delta[b, column]),
            low=json_number(delta.chi_low[b, column]),
            high=json_number(delta.chi_high[b, column]),
        )
        for b, name in enumerate(result.pairing.benchmarks)
        if result.n_active_bench[b, column] > 0
    ]
    flipped = result.examples.get(c, {})
    return DiffConcept(
        concept_id=c,
        label=result.labels.get(c),
        description=result.descriptions.get(c),
        X_model_a=json_number(delta.x_a[column]),
        X_model_b=json_number(delta.x_b[column]),
        delta_X_model=json_number(delta.x_delta[column]),
        low=json_number(delta.x_low[column]),
        high=json_number(delta.x_high[column]),
        relative=DiffInterval(
            delta=json_number(delta.rel_delta[column]),
            low=json_number(delta.rel_low[column]),
            high=json_number(delta.rel_high[column]),
        ),
        n_paired_active=int(result.n_active[column]),
        per_benchmark=per_bench,
        examples={key: [dict(row) for row in rows] for key, rows in flipped.items()},
        heldout=_verdict(result, column, direction),
    )


def _run_entry(run: DiffRun, mean_paired: float | None) -> dict[str, Any]:
    return {
        "path": str(run.path),
        "n_rows": run.keys.num_rows,
        "benchmarks": run.benchmarks,
        "evaluated_model": run.summary.get("evaluated_model") or run.summary.get("model_filter"),
        "mean_score_paired": mean_paired,
        "reader": run.identity.as_dict(),
    }


def summary_dict(result: DiffResult) -> dict[str, Any]:
    cfg = result.config
    pos_a, pos_b = result.pairing.pos_a, result.pairing.pos_b
    delta = result.delta
    defined = ~np.isnan(delta.x_delta)
    n_eligible = int(eligible(delta, result.n_active, cfg.min_rows, cfg.rank_by).sum())
    return {
        "kind": KIND,
        "cg_ray_version": __version__,
        "runs": {
            "a": _run_entry(result.a, json_number(result.a.scores[pos_a].mean())),
            "b": _run_entry(result.b, json_number(result.b.scores[pos_b].mean())),
        },
        "reader_check": {
            "checked_fields": result.checked_fields,
            "assumed_same": cfg.assume_same_reader,
            "text_a": result.a.identity.text,
            "text_b": result.b.identity.text,
        },
        "config": cfg.model_dump(),
        "method": "paired percentile bootstrap over the shared, scored rows, stratified by benchmark "
        "(cg_ray.compare.bootstrap); delta = B - A",
        "counts": {
            **result.pairing.counts,
            "concepts_compared": int(result.concept_ids.size),
            "concepts_defined": int(defined.sum()),
            "eligible": n_eligible,
            "confident_regressed": len(result.regressed),
            "confident_improved": len(result.improved),
            # per-concept intervals: this many per direction would exclude 0 by chance if nothing changed
            "expected_by_chance_per_direction": round(n_eligible * (1 - cfg.confidence) / 2, 1),
        },
        "paired_benchmarks": [
            {"benchmark": name, "mean_score_delta": json_number(delta.mean_delta[b])}
            for b, name in enumerate(result.pairing.benchmarks)
        ],
        "heldout": _heldout_block(result),
        "top_regressed": [concept_entry(result, c, "regressed").model_dump() for c in result.regressed[: cfg.top]],
        "top_improved": [concept_entry(result, c, "improved").model_dump() for c in result.improved[: cfg.top]],
        "seconds": result.seconds,
        "files": [S.DIFF_FILE, S.DIFF_BENCHMARKS_FILE, S.DIFF_JSON, S.DIFF_HTML],
    }


def _heldout_block(result: DiffResult) -> dict[str, Any]:
    """diff.json's findings: per direction the concepts any split chose, confirmed first (the first `top`)."""
    h, top = result.heldout, result.config.top
    return {
        "claim": "the paired rows where the concept fires changed (B - A) by more than the other rows of their "
        "benchmark, in the direction named",
        "decision": DECISION,
        "interval": INTERVAL,
        "splits": h.splits,
        "fdr": h.fdr,
        "tested_per_split": h.tried_per_split,
        "n_confirmed": {d: h.n_confirmed(d) for d in ("regressed", "improved")},
        "n_effects": {d: h.n_effects(d) for d in ("regressed", "improved")},  # one effect, one finding
        "n_tried": {d: len(getattr(h, d)) for d in ("regressed", "improved")},
        # chosen by enough splits to have an interval (the rest: by fewer than half of them)
        "n_with_interval": {
            d: sum(v.low is not None or v.high is not None for _, v in getattr(h, d)) for d in ("regressed", "improved")
        },
        **{
            d: [concept_entry(result, c, d).model_dump() for c, _ in getattr(h, d)[:top]]
            for d in ("regressed", "improved")
        },
    }


def write_diff(result: DiffResult, out: Path, *, overwrite: bool = False) -> dict[str, Any]:
    """Publish the diff into `out` (complete or absent); returns what diff.json holds."""
    from cg_ray.report.comparisons import diff_view
    from cg_ray.report.html import write_view

    with atomic_directory(out, overwrite=overwrite) as tmp:
        files = DiffDir(tmp)
        files.write_table(S.DIFF_FILE, diff_table(result))
        files.write_table(S.DIFF_BENCHMARKS_FILE, diff_benchmarks_table(result))
        written = files.write_json(S.DIFF_JSON, summary_dict(result), allow_nan=False)
        write_view(files, S.DIFF_HTML, diff_view(files), "diff")  # the explorer's app, diff.json embedded
    return written
