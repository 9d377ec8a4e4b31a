"""The null check: the whole judgement rerun with whole groups' scores permuted within the cells adjusted for,
where nothing is left to find beyond the metadata, so a confirmed finding beyond those fields is a false one.

`judgement.judge_rows` is the run's own judgement without its files (the metrics pass, the slices, the
concepts and the failure modes, each judged over the run's repeated grouped splits); `null_check` runs it on
permuted scores for a few seeds. The permutation moves clusters, not rows (`permute_blocks`): within a cell,
the scored rows of one group (a question or template: `groups.row_groups`, the run's own groups) form a block,
and blocks holding as many rows trade places whole, so the rows of a template keep sharing one score pattern
within each cell, as they do in the real data, and each cell keeps its scores. Counted as false
(`FALSE_KINDS`): every confirmed failure mode and concept, and every confirmed slice with a condition on a
field outside the permuted-within ones. A slice on those fields only is the metadata's own effect, which
the permutation keeps: it stays (rightly) confirmed and is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cg_ray.arrays import FloatArray, IntArray
from cg_ray.artifacts.rows import RowsFile
from cg_ray.config import MetricsConfig
from cg_ray.profile.findings import ResidualPass
from cg_ray.profile.judgement import Judgement, judge_rows
from cg_ray.profile.strata import RowFrame, cell_keys

NULL_SEEDS = (0, 1, 2)
# The confirmed counts (`Judgement.summary()["judgement"]["confirmed"]`) that are false findings under the null.
FALSE_KINDS = ("failure_modes", "concepts", "slices_beyond_adjusted")
COUNTED = "confirmed failure modes, concepts and slices with a condition outside the permuted-within fields"


def permute_blocks(scores: FloatArray, cells: IntArray, groups: IntArray, seed: int) -> FloatArray:
    """`scores` with whole blocks permuted within cells: a block is the scored rows of one group in one cell
    (in row order); within a cell, blocks of the same size are shuffled among themselves, each keeping its
    order. Every row gets a score of its own cell, a group's rows in a cell get one other group's (or their
    own) block, each cell keeps its multiset of scores, and unscored (NaN) rows stay unscored."""
    scores = np.asarray(scores, dtype=np.float64)
    out = scores.copy()
    scored = np.flatnonzero(~np.isnan(scores))
    if scored.size == 0:
        return out
    cells, groups = np.asarray(cells, np.int64), np.asarray(groups, np.int64)
    idx = scored[np.lexsort((scored, groups[scored], cells[scored]))]  # by cell, then group, then row
    cell, group = cells[idx], groups[idx]
    starts = np.flatnonzero(np.r_[True, (cell[1:] != cell[:-1]) | (group[1:] != group[:-1])])
    sizes = np.diff(np.r_[starts, idx.size])
    block_cell = cell[starts]
    # Sorted by (cell, size), once in block order and once at random: the j-th of each are in the same
    # (cell, size) class, so pairing them is a random permutation within every class.
    dest = np.lexsort((np.arange(starts.size), sizes, block_cell))
    src = np.lexsort((np.random.default_rng(seed).random(starts.size), sizes, block_cell))
    n = sizes[dest]
    within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    out[idx[np.repeat(starts[dest], n) + within]] = scores[idx[np.repeat(starts[src], n) + within]]
    return out


def permuted_within(frame: RowFrame, fields: Sequence[str], seed: int, groups: IntArray | None = None) -> FloatArray:
    """The frame's scores with whole groups' blocks permuted within the cells of `fields` (`permute_blocks`;
    `groups` None: every row its own group, a plain permutation of the scored rows of each cell)."""
    codes = np.arange(frame.n_rows, dtype=np.int64) if groups is None else groups
    return permute_blocks(frame.scores, cell_keys(frame, list(fields)), codes, seed)


def confirmed_counts(judgement: Judgement) -> dict[str, int]:
    confirmed: dict[str, int] = judgement.summary()["judgement"]["confirmed"]
    return dict(confirmed)


def false_findings(counts: Mapping[str, int]) -> int:
    """The confirmed findings of a null run that are false ones (`FALSE_KINDS`)."""
    return sum(int(counts.get(kind, 0)) for kind in FALSE_KINDS)


def null_check(
    rows: RowsFile,
    cfg: MetricsConfig,
    model: str | None = None,
    seeds: Sequence[int] = NULL_SEEDS,
    real: Judgement | ResidualPass | None = None,
) -> dict[str, Any]:
    """Confirmed findings per seed with whole groups' scores permuted within the cells of the fields the real
    run adjusts for (those fields are kept fixed, so every seed asks the same question). `real`: the run's
    own judgement of the same rows, or its pass set up from the light columns, when already made."""
    if real is None:
        residuals = ResidualPass(rows, model, cfg)
        frame, fields, plan = residuals.frame, list(residuals.adjusted_for), residuals.plan
    else:
        frame, fields, plan = real.frame, list(real.adjusted_for), real.plan
    fixed = cfg.model_copy(update={"adjust_for": ",".join(fields) if fields else "none"})
    runs = []
    for seed in seeds:
        counts = confirmed_counts(judge_rows(rows, fixed, model, permuted_within(frame, fields, seed, plan.clusters)))
        runs.append({"seed": int(seed), **counts, "false_findings": false_findings(counts)})
    return {
        "seeds": [int(s) for s in seeds],
        "permuted_within": fields,
        "unit": "group",  # whole groups' blocks within each cell (format 4); rows before
        "groups": {"rule": plan.rule, "n_groups": int(plan.n_groups)},
        "counted": COUNTED,
        "confirmed": runs,
        "false_findings": sum(r["false_findings"] for r in runs),
    }
