"""Whether another reader finds a run's finding again, on rows (docs/sensitivity.md).

The other reader's run has the run's rows, scores, groups and split seed: a finding it finds again is robust
to the reader, not replicated (the same halves chose and confirmed both). So each comparison says what it is
and carries what reads it: the overlap a random set of the match's size would have (`jaccard_by_chance`),
and for a finding not found the other reader's best q among its candidates flagging rows like these (a near
miss shows). A finding's rows are matched by findings the other reader's SAE makes (failure modes and
concepts, any kind, leaning the same way); a slice, a metadata rule every reader finds, only by a slice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import pyarrow as pa
from scipy import stats

from cg_ray import schemas as S
from cg_ray.profile.decision import judge
from cg_ray.profile.splits import SplitPlan
from cg_ray.sensitivity.findings import SLICE, Finding, ReaderFindings

FOUND_AT: Final = 0.5  # Jaccard of flagged rows
COVERED_AT: Final = 0.5  # share of the run's rows a partial match flags
RULE: Final = (
    f"found: the other reader confirms a finding of its SAE (failure mode or concept, same direction) whose "
    f"flagged rows overlap it with Jaccard >= {FOUND_AT} (beside it: the Jaccard a random set of that size "
    f"would have); partly: one flags >= {COVERED_AT:.0%} of its rows but overlaps less; not found: neither "
    "(beside it: the other reader's best q among its candidates flagging rows like these). The other reader "
    "reads the same rows with the same scores and splits: this is robustness to the reader, not replication. "
    "Slices (metadata rules) are found by every reader and counted apart. Replication is a finding confirmed "
    "on fresh rows (cg-ray probe)."
)


def jaccard_by_chance(n: int, a: int, b: int) -> float | None:
    """The expected Jaccard of a set of `a` rows with a random set of `b` rows among `n`: the overlap is
    hypergeometric (scipy.stats.hypergeom), and E[k / (a + b − k)] summed exactly over its support (no closed
    form for the ratio's mean). None when both sets are empty."""
    if a + b == 0 or n <= 0:
        return None
    a, b = min(a, n), min(b, n)
    k = np.arange(max(0, a + b - n), min(a, b) + 1)
    p = stats.hypergeom(n, a, b).pmf(k)
    return float(np.sum(p * k / (a + b - k)))


def _overlap(mine: Finding, theirs: Finding) -> tuple[float, float]:
    """(Jaccard, the share of `mine`'s rows `theirs` flags)."""
    inter = np.intersect1d(mine.rows, theirs.rows, assume_unique=True).size
    union = mine.rows.size + theirs.rows.size - inter
    return (inter / union if union else 0.0, inter / mine.rows.size if mine.rows.size else 0.0)


def _comparable(mine: Finding, others: Sequence[Finding]) -> list[Finding]:
    """The other reader's findings that may match `mine`: same direction, slices only with slices."""
    return [t for t in others if t.direction == mine.direction and (t.kind == SLICE) == (mine.kind == SLICE)]


def own_estimate(finding: Finding, plan: SplitPlan) -> float | None:
    """The run's own estimate of its finding's rows: the median over the run's splits of its test halves'
    contrast within the cells adjusted for (a slice: against the half's other rows). The halves that chose the
    finding: a figure, never a verdict."""
    per_split = []
    for split in plan.splits:
        half = split.whole if finding.kind == SLICE else split.by_cell
        per_split.append([(finding.key, half.contrast(finding.rows, None, finding.direction), 1)])
    verdict = judge(per_split, plan.n_splits, plan.fdr, (-1.0, 1.0)).get(finding.key)
    return None if verdict is None else verdict.estimate


def compare_finding(finding: Finding, reader: str, other: ReaderFindings, estimate: float | None) -> dict[str, object]:
    """One row of findings.parquet: the other reader's confirmed finding overlapping it most, the overlap a
    random set of that size would have, and its best q among candidates flagging rows like these."""
    best: tuple[float, float, Finding] | None = None
    near: Finding | None = None
    for theirs in _comparable(finding, other.findings):
        jaccard, covered = _overlap(finding, theirs)
        if theirs.confirmed and (best is None or (jaccard, covered) > best[:2]):
            best = (jaccard, covered, theirs)
        like = jaccard >= FOUND_AT or covered >= COVERED_AT
        if like and theirs.q_value is not None and (near is None or theirs.q_value < float(near.q_value or 0.0)):
            near = theirs
    if best and best[0] >= FOUND_AT:
        status = S.FOUND
    elif best and best[1] >= COVERED_AT:
        status = S.PARTLY
    else:
        status = S.NOT_FOUND
    match = best[2] if best and best[1] > 0 else None
    return {
        "kind": finding.kind,
        "finding": finding.key,
        "description": finding.description,
        "n_rows": int(finding.rows.size),
        "reader": reader,
        "status": status,
        "match": match.key if match else None,
        "match_description": match.description if match else None,
        "jaccard": best[0] if best else None,
        "jaccard_by_chance": jaccard_by_chance(other.n_rows, finding.rows.size, match.rows.size) if match else None,
        "covered": best[1] if best else None,
        "best_q": near.q_value if near else None,
        "best_q_finding": near.key if near else None,
        "own_estimate": estimate,
    }


def findings_table(rows: list[dict[str, object]]) -> pa.Table:
    from cg_ray.sensitivity.tables import FINDINGS_SCHEMA

    return pa.Table.from_pylist(rows, schema=FINDINGS_SCHEMA)
