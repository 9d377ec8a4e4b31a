"""Findings that survive a second look: every finding is chosen on K−1 folds of grouped rows and measured on
the fold held out (docs/trust.md).

`plan_folds` splits the rows into K folds by their groups (`folds.row_groups`: rows of one question or
template stay together) and gives each row what its cell predicts from the other folds. Concepts and slices
are chosen per fold exactly as the profile chooses them on all rows (`concept_candidates`,
`slices.training_slices`), then tested on the held-out fold (`heldout.cluster_test`) and judged over the
folds (`heldout.combine`); failure modes are built the same way in `modes.py`. `PoolRows` keeps the
activations of the concepts any fold may use, so no fold re-reads the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from scipy import sparse

from cg_ray.arrays import BoolArray, FloatArray, IntArray
from cg_ray.artifacts.rows import RowsFile
from cg_ray.config import MetricsConfig
from cg_ray.metrics.compute import CGResult
from cg_ray.profile.folds import assign_folds, row_groups, too_few_groups
from cg_ray.profile.heldout import FoldTest, HeldOutFold, Verdict, combine, fold_q_values, not_tested
from cg_ray.profile.ranking import eligible
from cg_ray.profile.residual import ResidualAccumulator, Residuals, residual_order
from cg_ray.profile.slices import (
    Slice,
    SliceCounts,
    mean_intervals,
    near_duplicate,
    slice_counts,
    training_slices,
    weakest_slices,
)
from cg_ray.profile.strata import RowFrame, cell_keys

POOL_FACTOR = 4  # concepts a fold considers for failure modes, per finding reported
LESS, GREATER = "less", "greater"


@dataclass(frozen=True)
class FoldPlan:
    folds: int
    fdr: float
    fold: IntArray  # per frame row
    clusters: IntArray  # per frame row: its group
    rule: str  # how the groups were made
    n_groups: int
    by_cell: list[HeldOutFold]  # per fold: its held-out rows within the cells adjusted for (modes, concepts)
    whole: list[HeldOutFold]  # per fold: its held-out rows as one cell (slices: against the fold's other rows)
    skipped: str | None = None  # why nothing is judged (too few groups to fill the folds)
    seed: int = 0

    @property
    def fold_confidence(self) -> float:
        """Each fold's interval level: 1 − 0.05/K, so the one fold's interval shown covers at 95%."""
        return 1.0 - 0.05 / self.folds

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {
            "folds": self.folds,
            "fdr": self.fdr,
            "seed": self.seed,
            "groups": {"rule": self.rule, "n_groups": self.n_groups},
        }
        if self.skipped:
            out["skipped"] = self.skipped
        return out


def plan_folds(rows: RowsFile, frame: RowFrame, adjusted_for: Sequence[str], cfg: MetricsConfig) -> FoldPlan:
    groups = row_groups(rows, frame, folds=cfg.folds)
    skipped = too_few_groups(groups, cfg.folds)
    if skipped:
        fold = np.zeros(frame.n_rows, np.int64)
        return FoldPlan(cfg.folds, cfg.fdr, fold, groups.codes, groups.rule, groups.n_groups, [], [], skipped)
    fold = assign_folds(groups.codes, cfg.folds, cfg.crossfit_seed).astype(np.int64)
    cells = cell_keys(frame, list(adjusted_for))
    one = np.zeros(frame.n_rows, np.int64)
    by_cell, whole = [], []
    for k in range(cfg.folds):
        here = np.flatnonzero((fold == k) & frame.scored)
        by_cell.append(HeldOutFold.of(here, frame.scores, cells, groups.codes))
        whole.append(HeldOutFold.of(here, frame.scores, one, groups.codes))
    return FoldPlan(
        cfg.folds,
        cfg.fdr,
        fold,
        groups.codes.astype(np.int64),
        groups.rule,
        groups.n_groups,
        by_cell,
        whole,
        seed=cfg.crossfit_seed,
    )


class PoolRows:
    """The activations s̃ of a pool of concepts on every row (rows × pool, sparse by column), gathered in one
    pass: memory O(the pool's active rows), never O(rows × d_sae)."""

    def __init__(self, pool: Iterable[int], d_sae: int) -> None:
        self.pool = np.asarray(sorted(set(int(c) for c in pool)), dtype=np.int64)
        self.slot_of = np.full(d_sae, -1, dtype=np.int64)
        self.slot_of[self.pool] = np.arange(self.pool.size)
        self._rows: list[IntArray] = []
        self._slots: list[IntArray] = []
        self._acts: list[npt.NDArray[np.float32]] = []
        self.n_rows = 0
        self.matrix = sparse.csc_matrix((0, self.pool.size))

    def add(
        self, offsets: IntArray, concept_ids: npt.NDArray[np.integer], concept_acts: npt.NDArray[np.floating]
    ) -> None:
        n = len(offsets) - 1
        slots = self.slot_of[np.asarray(concept_ids, dtype=np.int64)]
        acts = np.asarray(concept_acts)
        hit = (slots >= 0) & (acts > 0)
        if hit.any():
            self._rows.append(self.n_rows + np.repeat(np.arange(n), np.diff(offsets))[hit])
            self._slots.append(slots[hit])
            self._acts.append(acts[hit].astype(np.float32))
        self.n_rows += n

    def finish(self) -> PoolRows:
        cat = lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt)  # noqa: E731
        rows, slots, acts = cat(self._rows, np.int64), cat(self._slots, np.int64), cat(self._acts, np.float32)
        self.matrix = sparse.csc_matrix((acts, (rows, slots)), shape=(self.n_rows, self.pool.size))
        self._rows, self._slots, self._acts = [], [], []
        return self

    def concept(self, c: int) -> tuple[IntArray, FloatArray]:
        """(row positions, s̃) of one pool concept, rows ascending."""
        s = int(self.slot_of[c])
        lo, hi = self.matrix.indptr[s], self.matrix.indptr[s + 1]
        return self.matrix.indices[lo:hi].astype(np.int64), self.matrix.data[lo:hi].astype(np.float64)

    def members(self, concepts: Sequence[int]) -> tuple[IntArray, FloatArray]:
        """(row positions, summed s̃) of the rows where any of the concepts is active."""
        parts = [self.concept(c) for c in concepts]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0)
        rows = np.concatenate([p[0] for p in parts])
        acts = np.concatenate([p[1] for p in parts])
        uniq, inverse = np.unique(rows, return_inverse=True)
        summed: FloatArray = np.bincount(inverse, weights=acts, minlength=uniq.size).astype(np.float64)
        return uniq.astype(np.int64), summed

    def intersections(self, concepts: Sequence[int]) -> IntArray:
        """Rows shared by each pair of the concepts (the diagonal: each one's rows)."""
        cols = self.matrix[:, self.slot_of[np.asarray(concepts, dtype=np.int64)]]
        b = (cols > 0).astype(np.float64)
        out: IntArray = np.rint((b.T @ b).toarray()).astype(np.int64)
        return out


def strength_residual_order(res: Residuals, mask: BoolArray) -> IntArray:
    """Concepts in `mask` with a defined interval, most confidently above their cells first."""
    idx = np.flatnonzero(mask & ~np.isnan(res.low))
    order: IntArray = idx[np.lexsort((idx, -np.nan_to_num(res.n_eff[idx]), -res.low[idx]))].astype(np.int64)
    return order


@dataclass(frozen=True)
class ConceptCandidates:
    """Per fold: the concepts its training part ranks most confidently below (and above) their cells."""

    below: list[IntArray]
    above: list[IntArray]

    def pool(self) -> set[int]:
        return {int(c) for part in (*self.below, *self.above) for c in part}


def concept_candidates(
    acc: ResidualAccumulator, result: CGResult, top_k: int, skipped: bool = False
) -> ConceptCandidates:
    ok = eligible(result) & (not skipped)
    below, above = [], []
    for k in range(acc.folds):
        res = acc.finish(leave_out=k)
        r = np.nan_to_num(res.residual)
        below.append(residual_order(res, ok & (r < 0))[: POOL_FACTOR * top_k])
        above.append(strength_residual_order(res, ok & (r > 0))[:top_k])
    return ConceptCandidates(below, above)


Tests = dict[object, dict[int, tuple[FoldTest, int]]]  # finding → fold → (its held-out test, its training rank)


def fold_judgements(tests: Tests, folds: int) -> dict[object, dict[int, tuple[FoldTest, float]]]:
    """Weighted Benjamini–Hochberg within each fold over every candidate it tested (weights from the
    candidates' training ranks, `heldout.fold_q_values`): finding → fold → (test, q-value)."""
    qs: dict[object, dict[int, tuple[FoldTest, float]]] = {key: {} for key in tests}
    for k in range(folds):
        keys = [key for key, per in tests.items() if k in per]
        p = np.array([tests[key][k][0].p_value for key in keys])
        q = fold_q_values(p, np.array([tests[key][k][1] for key in keys], dtype=np.int64))
        for key, qv in zip(keys, q, strict=True):
            qs[key][k] = (tests[key][k][0], float(qv))
    return qs


def judge(tests: Tests, plan: FoldPlan, bounds: tuple[float, float]) -> dict[object, Verdict]:
    """Each finding's verdict over the folds (`fold_judgements`, then `heldout.combine`)."""
    qs = fold_judgements(tests, plan.folds)
    return {key: combine(per, plan.folds, plan.fdr, bounds) for key, per in qs.items()}


def concept_verdicts(cands: ConceptCandidates, pool: PoolRows, plan: FoldPlan) -> dict[object, Verdict]:
    """(concept, "less" | "greater") → its verdict: is its s̃-weighted held-out residual below (above) 0?"""
    tests: Tests = {}
    for k in range(plan.folds):
        for direction, chosen in ((LESS, cands.below[k]), (GREATER, cands.above[k])):
            for rank, c in enumerate(chosen, start=1):
                rows, acts = pool.concept(int(c))
                t = plan.by_cell[k].contrast(rows, acts, direction, plan.fold_confidence)  # type: ignore[arg-type]
                tests.setdefault((int(c), direction), {})[k] = (t, rank)
    return judge(tests, plan, (-1.0, 1.0))


@dataclass(frozen=True)
class SliceFinding:
    slice: Slice  # in-sample figures (every scored row)
    verdict: Verdict  # held out, on the score scale; its baseline is the mean it was compared with


def slice_findings(frame: RowFrame, plan: FoldPlan, cfg: MetricsConfig) -> list[SliceFinding]:
    """The slices chosen in some fold, confirmed first (held-out upper end ascending), then the candidates
    (q-value ascending); near-duplicates (≥ 0.8 Jaccard over scored rows) of a better one dropped."""
    if not frame.codes or not frame.scored.any():
        return []
    if plan.skipped:  # too few groups to judge anything: the in-sample weakest slices, unjudged
        weakest = weakest_slices(frame, cfg.top_k, cfg.slice_order, cfg.slice_min_rows)
        return [SliceFinding(s, not_tested()) for s in weakest]
    counts: SliceCounts = slice_counts(frame, plan.fold, plan.folds, cfg.slice_order)
    masks: dict[tuple[tuple[str, int], ...], BoolArray] = {}
    tests: Tests = {}
    # The rows a slice needs, scaled to the training part: a 40-row benchmark must not drop out of a half.
    min_rows = max(1, int(np.ceil(cfg.slice_min_rows * (plan.folds - 1) / plan.folds)))
    for k in range(plan.folds):
        chosen = training_slices(frame, counts, k, cfg.top_k, min_rows, masks=masks)
        for rank, s in enumerate(chosen, start=1):
            t = plan.whole[k].contrast(np.flatnonzero(masks[s.conditions]), confidence=plan.fold_confidence)
            shift = t.baseline  # back on the score scale: the held-out mean and its interval
            tests.setdefault(s.conditions, {})[k] = (
                replace(t, estimate=t.estimate + shift, low=t.low + shift, high=t.high + shift),
                rank,
            )
    verdicts = judge(tests, plan, (0.0, 1.0))
    everything = {s.conditions: s for s in _in_sample(frame, counts, list(verdicts))}
    order = sorted(verdicts, key=lambda key: rank_key(verdicts[key]))
    kept: list[SliceFinding] = []
    kept_masks: list[BoolArray] = []
    for key in order:
        m = masks[key]  # type: ignore[index]
        if near_duplicate(m, kept_masks):
            continue
        kept.append(SliceFinding(everything[key], verdicts[key]))  # type: ignore[index]
        kept_masks.append(m)
        if len(kept) == cfg.top_k:
            break
    return kept


def rank_key(v: Verdict) -> tuple[int, float, float]:
    """Confirmed first, by the held-out upper end; then the candidates by q-value."""
    if v.confirmed:
        return (0, v.high if v.high is not None else 1.0, v.q_value)
    return (1, v.q_value, v.high if v.high is not None else 1.0)


def _in_sample(frame: RowFrame, counts: SliceCounts, keys: list[object]) -> list[Slice]:
    index = {c: i for i, c in enumerate(counts.conditions)}
    rows = [index[k] for k in keys]  # type: ignore[index]
    n = counts.size[rows].sum(axis=1)
    total = counts.total[rows].sum(axis=1)
    low, high = mean_intervals(n, total, counts.binary, 0.95)
    return [
        Slice(counts.conditions[i], int(n[j]), float(total[j] / n[j]), float(low[j]), float(high[j]))
        for j, i in enumerate(rows)
    ]
