"""Concepts and slices judged over repeated grouped splits (docs/findings.md): each split ranks them on its
choosing half exactly as the profile ranks them on all rows (`concept_candidates`, the plan's
`Split.slices`), tests its first top-k of each kind on its test half (`heldout.HeldOut.contrast`), and the
decision rule combines the splits (`decision.judge`). Failure modes are built the same way in `split_modes.py`.
`pool.PoolRows` holds the activations of the concepts any split may use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from cg_ray.arrays import BoolArray, IntArray
from cg_ray.config import MetricsConfig
from cg_ray.metrics.compute import CGResult
from cg_ray.profile.decision import (
    GREATER,
    LESS,
    Alternative,
    Judged,
    Observer,
    SplitTest,
    Verdict,
    judge,
    not_tested,
    rank_key,
)
from cg_ray.profile.pool import PoolRows
from cg_ray.profile.ranking import eligible
from cg_ray.profile.residual import ResidualAccumulator, Residuals, residual_order
from cg_ray.profile.slices import Slice, SliceCounts, mean_intervals, near_duplicate, weakest_slices
from cg_ray.profile.splits import SplitPlan
from cg_ray.profile.strata import RowFrame

MODE_POOL_FACTOR = 4  # concepts a split considers for failure modes, per finding reported


Conditions = tuple[tuple[str, int], ...]  # a slice: (field, value code) pairs


class ConceptKey(NamedTuple):
    concept: int
    direction: Alternative  # "less": below its cells (a weakness); "greater": above (a strength)


def strength_residual_order(res: Residuals, mask: BoolArray) -> IntArray:
    """Concepts in `mask` with a defined interval, most confidently above their cells first."""
    idx = np.flatnonzero(mask & ~np.isnan(res.low))
    order: IntArray = idx[np.lexsort((idx, -np.nan_to_num(res.n_eff[idx]), -res.low[idx]))].astype(np.int64)
    return order


@dataclass(frozen=True)
class ConceptCandidates:
    """Per split: the concepts its choosing half ranks most confidently below (and above) their cells."""

    below: list[IntArray]
    above: list[IntArray]

    def pool(self) -> set[int]:
        return {int(c) for part in (*self.below, *self.above) for c in part}


def concept_candidates(acc: ResidualAccumulator, result: CGResult, plan: SplitPlan, tested: int) -> ConceptCandidates:
    """Per split, on its choosing half: the first 4 × `tested` concepts below their cells (tested, and the
    failure modes' pool) and the first `tested` above."""
    ok = eligible(result)
    below, above = [], []
    for split in plan.splits:
        res = acc.finish_split(split.index, _parts_of(plan, split.choosing))
        r = np.nan_to_num(res.residual)
        below.append(residual_order(res, ok & (r < 0))[: MODE_POOL_FACTOR * tested])
        above.append(strength_residual_order(res, ok & (r > 0))[:tested])
    return ConceptCandidates(below, above)


def _parts_of(plan: SplitPlan, choosing: BoolArray) -> BoolArray:
    chosen = np.zeros(plan.n_parts, bool)
    chosen[np.unique(plan.part[choosing])] = True
    return chosen


def concept_verdicts(
    cands: ConceptCandidates, pool: PoolRows, plan: SplitPlan, observe: Observer | None = None
) -> dict[ConceptKey, Verdict]:
    """Each concept a split chose, by direction: is its s̃-weighted residual on the test half below (above) 0?
    Both directions are one family (each split's BH runs over the weaknesses and the strengths it tested), so
    the concepts, whichever way they lean, are held to one false discovery rate."""
    per_split: list[list[tuple[ConceptKey, SplitTest, int]]] = []
    for split, below, above in zip(plan.splits, cands.below, cands.above, strict=True):
        here = []
        for direction, chosen in ((LESS, below), (GREATER, above)):
            for rank, c in enumerate(chosen, start=1):
                rows, acts = pool.concept(int(c))
                here.append((ConceptKey(int(c), direction), split.by_cell.contrast(rows, acts, direction), rank))
        per_split.append(here)
    verdicts = judge(per_split, plan.n_splits, plan.fdr, (-1.0, 1.0))
    if observe is not None:
        observe(Judged("concepts", per_split, plan.n_splits, plan.fdr, verdicts))
    return verdicts


@dataclass(frozen=True)
class SliceFinding:
    slice: Slice  # in-sample figures (every scored row)
    verdict: Verdict  # on the contrast scale (the slice's test-half mean − the half's other rows' mean)


def slice_findings(
    frame: RowFrame, plan: SplitPlan, cfg: MetricsConfig, observe: Observer | None = None
) -> tuple[list[SliceFinding], int]:
    """The slices chosen in some split, confirmed first (upper end ascending), then the candidates (q-value
    ascending); near-duplicates (≥ 0.8 Jaccard over scored rows) of a better one dropped. With them, how many
    slices the splits tested in all (the family)."""
    if not frame.codes or not frame.scored.any():
        return [], 0
    if plan.skipped or plan.counts is None:  # too few groups to judge anything: the in-sample weakest, unjudged
        weakest = weakest_slices(frame, cfg.top_k, cfg.slice_order, cfg.slice_min_rows)
        return [SliceFinding(s, not_tested()) for s in weakest], 0
    masks: dict[Conditions, BoolArray] = {}
    per_split: list[list[tuple[Conditions, SplitTest, int]]] = []
    for split in plan.splits:
        here = []
        for rank, s in enumerate(split.slices, start=1):
            if s.conditions not in masks:
                masks[s.conditions] = s.mask(frame)
            # A slice on the split's adjusted fields alone is the metadata's own effect: against the half's other
            # rows. One with another field is a finding beyond them: against the other rows of its own cells,
            # as modes are ("ambiguous & negative" must not inherit "ambiguous"'s gap).
            on_adjusted = {name for name, _ in s.conditions} <= set(split.adjusted_for)
            half = split.whole if on_adjusted else split.by_cell
            here.append((s.conditions, half.contrast(np.flatnonzero(masks[s.conditions])), rank))
        per_split.append(here)
    verdicts = judge(per_split, plan.n_splits, plan.fdr, (-1.0, 1.0))
    if observe is not None:
        observe(Judged("slices", per_split, plan.n_splits, plan.fdr, verdicts))
    everything = {s.conditions: s for s in _in_sample(frame, plan.counts, list(verdicts))}
    kept: list[SliceFinding] = []
    kept_masks: list[BoolArray] = []
    for key in sorted(verdicts, key=lambda k: rank_key(verdicts[k])):
        if near_duplicate(masks[key], kept_masks):
            continue
        kept.append(SliceFinding(everything[key], verdicts[key]))
        kept_masks.append(masks[key])
        if len(kept) == cfg.top_k:
            break
    return kept, len(verdicts)


def _in_sample(frame: RowFrame, counts: SliceCounts, keys: list[Conditions]) -> list[Slice]:
    index = {c: i for i, c in enumerate(counts.conditions)}
    rows = [index[k] for k in keys]
    n = counts.size[rows].sum(axis=1)
    total = counts.total[rows].sum(axis=1)
    low, high = mean_intervals(n, total, counts.binary, 0.95)
    return [
        Slice(counts.conditions[i], int(n[j]), float(total[j] / n[j]), float(low[j]), float(high[j]))
        for j, i in enumerate(rows)
    ]
