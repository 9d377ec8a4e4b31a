"""Repeated grouped splits: where each finding is chosen and where it is tested (docs/findings.md).

The row groups (`groups.row_groups`: rows of one question or template stay together) are dealt into
`PARTS` parts of near-equal rows, once. Each of the R splits (`MetricsConfig.splits`) draws CHOOSING_SHARE of
the parts at random to *choose* — rank the concepts, build and rank the failure modes, rank the slices, pick
the fields of `--adjust-for auto` and compute the cell means the rankings subtract, all from those rows
alone — and tests what it chose on the rest (`heldout.HeldOut`). Everything additive is summed per part in one pass
(the residual sums, the slice counts), so a split's choosing sums are a sum over its parts and R splits cost
about one pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cg_ray.arrays import BoolArray, FloatArray, IntArray
from cg_ray.artifacts.rows import RowsFile
from cg_ray.config import MetricsConfig
from cg_ray.profile.groups import assign_parts, row_groups, too_few_groups
from cg_ray.profile.heldout import HeldOut
from cg_ray.profile.slices import Slice, SliceCounts, best_fields, slice_counts, training_slices
from cg_ray.profile.strata import RowFrame, cell_keys, expected_scores, parse_adjust_for

PARTS = 20  # parts of grouped rows
# The share of the parts a split chooses on; it tests on the rest. Choosing on 35% found 3-5 points more of the
# planted effects in simulation but confirmed fewer findings on real suites (BBQ) and more under their
# permuted nulls (scripts/fdr_simulation.py, docs/findings.md): half stays.
CHOOSING_SHARE = 0.5


@dataclass
class Split:
    """One split: the part that chooses, the fields and cell means it adjusts for, the rest that tests."""

    index: int
    choosing: BoolArray  # per frame row
    adjusted_for: list[str]
    cells: IntArray  # per frame row: its cell of `adjusted_for` (the frame's cached keys, shared)
    cell_mean: FloatArray  # per cell: its mean over the choosing half's scored rows (a parent's when few)
    slices: list[Slice]  # the weakest slices of the choosing half (ranked as the run ranks them)
    by_cell: HeldOut  # the test half within the cells adjusted for (modes, concepts)
    whole: HeldOut  # the test half as one cell (slices: against the half's other rows)

    @property
    def expected(self) -> FloatArray:
        """Per frame row: its cell's mean over the choosing half (made when asked: ten splits kept per-row
        copies, 8 bytes a row each)."""
        return self.expected_at(slice(None))

    def expected_at(self, rows: slice) -> FloatArray:
        out: FloatArray = self.cell_mean[self.cells[rows]]
        return out


@dataclass
class SplitPlan:
    n_splits: int  # R, as configured (`splits` below holds them, none when too few groups)
    fdr: float
    seed: int
    part: IntArray  # per frame row: its part
    n_parts: int
    clusters: IntArray  # per frame row: its group
    rule: str  # how the groups were made
    n_groups: int
    counts: SliceCounts | None  # the slice counts per part
    splits: list[Split] = field(default_factory=list)
    skipped: str | None = None  # why nothing is judged (too few groups to split)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {
            "splits": self.n_splits,
            "parts": self.n_parts,
            "choosing_share": CHOOSING_SHARE,
            "fdr": self.fdr,
            "seed": self.seed,
            "groups": {"rule": self.rule, "n_groups": self.n_groups},
        }
        if self.skipped:
            out["skipped"] = self.skipped
        return out


def plan_splits(rows: RowsFile, frame: RowFrame, cfg: MetricsConfig) -> SplitPlan:
    """The parts and the R splits; each split resolves `cfg.adjust_for` (`auto`: from the weakest slices of
    its own choosing half) and its cell means on its choosing half."""
    groups = row_groups(rows, frame)
    codes = groups.codes.astype(np.int64)
    notes: list[str] = []
    if groups.rule == "one row each":
        notes.append(
            "no groups found (no `group` column or metadata field, no '#' in row ids, no prompts): every row is "
            "its own group, so rows of one question or template may land on both sides of a split and make a "
            "finding look surer than it is"
        )
    skipped = too_few_groups(groups)
    n_parts = min(PARTS, groups.n_groups) if not skipped else 1
    if skipped or n_parts < 2:
        part = np.zeros(frame.n_rows, np.int64)
        plan = SplitPlan(cfg.splits, cfg.fdr, cfg.split_seed, part, 1, codes, groups.rule, groups.n_groups, None)
        plan.skipped = skipped or "too few groups to split"
        plan.notes = notes
        return plan
    part = assign_parts(codes, n_parts, cfg.split_seed).astype(np.int64)
    counts = slice_counts(frame, part, n_parts, cfg.slice_order) if frame.codes and frame.scored.any() else None
    plan = SplitPlan(cfg.splits, cfg.fdr, cfg.split_seed, part, n_parts, codes, groups.rule, groups.n_groups, counts)
    plan.notes = notes
    rng = np.random.default_rng([cfg.split_seed, 1])
    # The rows a slice needs, scaled to the choosing part: a 40-row benchmark must not drop out of it.
    min_rows = max(1, int(np.ceil(cfg.slice_min_rows * CHOOSING_SHARE)))
    for s in range(cfg.splits):
        chosen_parts = np.zeros(n_parts, bool)
        chosen_parts[rng.permutation(n_parts)[: max(1, min(n_parts - 1, int(n_parts * CHOOSING_SHARE + 1e-9)))]] = True
        choosing = chosen_parts[part]
        slices = (
            training_slices(frame, counts, chosen_parts, cfg.tested_per_split, min_rows) if counts is not None else []
        )
        fields, _ = parse_adjust_for(cfg.adjust_for, frame, best_fields(slices))
        cells = cell_keys(frame, fields)
        cell_mean = np.full(int(cells.max(initial=-1)) + 1, np.nan)
        cell_mean[cells] = expected_scores(frame, fields, fit=choosing)  # one value a cell: its rows agree
        test = np.flatnonzero(~choosing & frame.scored)
        by_cell = HeldOut.of(test, frame.scores, cells, codes)
        plan.splits.append(Split(s, choosing, fields, cells, cell_mean, slices, by_cell, by_cell.one_cell()))
    return plan
