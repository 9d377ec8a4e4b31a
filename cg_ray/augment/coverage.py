"""The benchmark's coverage before → after the kept items are added, by scope's own code and figures.

- **per concept in the reference's use**: the benchmark's firing rows on scope/gaps.parquet (k_b of n_b)
  plus the kept items on which the concept fires at the same threshold (`firing_threshold`, s̃ ≥ it), then
  `scope.reference.compare` against the same reference counts (reference_rows of reference_n). The before
  side is recomputed the same way and must give scope's verdicts (else scope/ is stale: an error);
- **a targeted concept's state**: missing (a gap on no row), gap (tested confidently less than the
  reference), or covered (no longer confidently less);
- **in-scope coverage**: the share of the concepts in the reference's use that are not gaps;
- **χ_bench** (the paper's, `metrics.compute.chi_bench`) over the benchmark's rows of rows.parquet plus the
  kept items' s̃, classed as the metrics class a benchmark's concepts (`coverage_classes`: missing below ε,
  over at or above its 90th percentile): the concepts the items pushed into over-representation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.augment.check import Read
from cg_ray.augment.plan import AugmentPlan
from cg_ray.errors import InputError
from cg_ray.metrics.compute import chi_bench, coverage_classes
from cg_ray.scope.counts import read_activations
from cg_ray.scope.reference import ReferenceComparison, compare, shares_of
from cg_ray.scope.run import run_metrics_config

OVER_SHOWN = 20


@dataclass(frozen=True)
class CoverageChange:
    before: ReferenceComparison  # over the concepts of scope/gaps.parquet (their ids in `concepts`)
    after: ReferenceComparison
    concepts: np.ndarray
    chi_before: np.ndarray  # d_sae
    chi_after: np.ndarray
    class_before: np.ndarray  # d_sae, codes into S.COVERAGE_CLASSES
    class_after: np.ndarray
    n_items: int

    def in_scope(self, cmp: ReferenceComparison) -> float:
        t = cmp.table
        return float(1.0 - t["gap"].sum() / t["in_reference"].sum()) if t["in_reference"].any() else float("nan")

    def state(self, concept: int, cmp: ReferenceComparison) -> str:
        row = cmp.table.iloc[int(np.searchsorted(self.concepts, concept))]
        return ("missing" if row["missing"] else "gap") if row["gap"] else "covered"

    def row(self, concept: int, cmp: ReferenceComparison) -> Any:
        return cmp.table.iloc[int(np.searchsorted(self.concepts, concept))]

    def over_represented(self) -> list[int]:
        over = S.COVERAGE_CLASSES.index("over")
        return [int(c) for c in np.flatnonzero((self.class_after == over) & (self.class_before != over))]


def _act_sum(plan: AugmentPlan) -> np.ndarray:
    acts = read_activations([RunDir(plan.run).rows])
    sel = np.flatnonzero(acts.groups == plan.benchmark)
    return np.asarray(acts.matrix.tocsr()[sel].sum(axis=0), dtype=np.float64).ravel()


def coverage_change(plan: AugmentPlan, kept: Sequence[Read]) -> CoverageChange:
    scope = plan.scope
    concepts = scope["concept_id"].to_numpy(dtype=np.int64)
    kb, kr = scope["bench_rows"].to_numpy(np.int64), scope["reference_rows"].to_numpy(np.int64)
    nb, nr = int(scope["bench_n"].iloc[0]), int(scope["reference_n"].iloc[0])
    threshold = scope["firing_threshold"].to_numpy(np.float64)
    # each side's sums by group as scope stored them: the same test, and with the items added exactly
    bench_shares, ref_shares = shares_of(scope, "bench"), shares_of(scope, "reference")
    before = compare(
        kb, nb, kr, nr, plan.rule, benchmark=plan.benchmark, reference=plan.reference,
        bench_shares=bench_shares, ref_shares=ref_shares,
    )  # fmt: skip
    if not np.array_equal(before.table["gap"].to_numpy(), scope["gap"].to_numpy()):
        raise InputError(
            "scope/gaps.parquet does not give its own verdicts again: rerun `cg-ray scope`", path=str(plan.run)
        )
    act_before = _act_sum(plan)
    added, act_items = np.zeros_like(kb), np.zeros_like(act_before)
    for r in kept:
        ok = (r.concept_acts > 0) & (r.concept_ids < act_items.size)
        ids, acts = r.concept_ids[ok], r.concept_acts[ok]
        np.add.at(act_items, ids, acts)
        pos = np.searchsorted(concepts, ids)
        hit = (pos < concepts.size) & (concepts[np.minimum(pos, concepts.size - 1)] == ids)
        fires = hit & (acts >= threshold[np.minimum(pos, concepts.size - 1)])
        added[pos[fires]] += 1
    after = compare(
        kb + added, nb + len(kept), kr, nr, plan.rule, benchmark=plan.benchmark, reference=plan.reference,
        bench_shares=None if bench_shares is None else bench_shares.with_added(added, len(kept)),
        ref_shares=ref_shares,
    )  # fmt: skip
    config = run_metrics_config(RunDir(plan.run))
    classes = [
        coverage_classes(chi, config.epsilon, config.low_percentile, config.high_percentile)[0]
        for chi in (chi_bench(act_before), chi_bench(act_before + act_items))
    ]
    return CoverageChange(
        before=before, after=after, concepts=concepts, chi_before=chi_bench(act_before),
        chi_after=chi_bench(act_before + act_items), class_before=classes[0], class_after=classes[1],
        n_items=len(kept),
    )  # fmt: skip


def coverage_frame(plan: AugmentPlan, change: CoverageChange, counts: dict[int, dict[str, int]]) -> pd.DataFrame:
    """coverage.parquet: one row per targeted concept, before → after."""
    out = []
    for t in plan.targets:
        c = t.concept_id
        b, a = change.row(c, change.before), change.row(c, change.after)
        out.append(
            {
                "benchmark": plan.benchmark,
                "concept_id": c,
                "label": t.label,
                "items_written": counts[c]["written"],
                "items_kept": counts[c]["kept"],
                "items_firing": int(a["bench_rows"] - b["bench_rows"]),
                "bench_rows_before": int(b["bench_rows"]),
                "bench_rows_after": int(a["bench_rows"]),
                "bench_n_before": change.before.n_bench,
                "bench_n_after": change.after.n_bench,
                "bench_share_before": float(b["bench_share"]),
                "bench_share_after": float(a["bench_share"]),
                "reference_share": float(b["reference_share"]),
                "ratio_before": float(b["ratio"]),
                "ratio_after": float(a["ratio"]),
                "q_value_before": float(b["q_value"]),
                "q_value_after": float(a["q_value"]),
                "state_before": change.state(c, change.before),
                "state_after": change.state(c, change.after),
                "chi_bench_before": float(change.chi_before[c]),
                "chi_bench_after": float(change.chi_after[c]),
                "class_before": S.COVERAGE_CLASSES[int(change.class_before[c])],
                "class_after": S.COVERAGE_CLASSES[int(change.class_after[c])],
            }
        )
    return pd.DataFrame(out, columns=S.AUGMENT_COVERAGE_SCHEMA.names)
