"""The benchmark's row-level view before → after the kept items are added (docs/augment.md, "Coverage before →
after"): scope's own code (`scope.uncovered.coverage_of_fired`) over the same rows scope read — the run's and
each reference rows file it named (scope/summary.json's `reference_files`) — at the same firing thresholds, once
as scope saw them and once with each kept item added as one more benchmark row (its own group: the items are
distinct texts, as scope groups distinct prompts). The "before" must give scope's uncovered share again, else
scope/ is stale and no row view is claimed (the note says why). The headline it answers: how much of the
reference the benchmark still leaves uncovered, and whether the theme targeted is still confirmed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from cg_ray.artifacts.layout import RunDir
from cg_ray.augment.check import Read
from cg_ray.augment.plan import AugmentPlan
from cg_ray.scope.run import read_fired
from cg_ray.scope.uncovered import RowCoverage, UncoveredRule, coverage_of_fired, firing_indicators


@dataclass(frozen=True)
class RowViewChange:
    before: RowCoverage
    after: RowCoverage
    n_items: int

    def as_dict(self) -> dict[str, Any]:
        """summary.json's `row_view`: the uncovered share, the region's confirmation and the confirmed themes'
        carrying concepts, before → after."""

        def side(view: RowCoverage) -> dict[str, Any]:
            return {
                "uncovered": view.uncovered.as_dict(),
                "confirmed": view.confirmed,
                "themes": [t.concept for t in view.themes if t.confirmed],
            }

        return {"before": side(self.before), "after": side(self.after), "items_added": self.n_items}


def _item_rows(kept: Sequence[Read], d_sae: int) -> sparse.csr_matrix:
    if not kept:
        return sparse.csr_matrix((0, d_sae))
    rows = np.concatenate([np.full(r.concept_ids.size, i, dtype=np.int64) for i, r in enumerate(kept)])
    ids = np.concatenate([r.concept_ids for r in kept])
    ok = (ids >= 0) & (ids < d_sae)
    data = (np.concatenate([r.concept_acts for r in kept])[ok], (rows[ok], ids[ok]))
    return sparse.csr_matrix(data, shape=(len(kept), d_sae))


def row_view_change(plan: AugmentPlan, kept: Sequence[Read]) -> RowViewChange | str:
    """The change, or why there is none (a note for summary.json), from the benchmark's scope summary entry
    (`plan.scope_entry`)."""
    entry = plan.scope_entry
    stored = (entry or {}).get("row_view")
    if not entry or stored is None or "reference_groups" not in entry:
        return "the scope predates the row view's record of its references: rerun `cg-ray scope` for it"
    files = [Path(p) for p in entry.get("reference_files", [])]
    gone = [str(p) for p in files if not p.is_file()]
    if gone:
        return f"the reference rows scope read are gone ({', '.join(gone)}): no row view after"
    read = read_fired(RunDir(plan.run).rows, files)  # every row scope read: its thresholds again
    acts, fired, clusters, thresholds = read.acts, read.fired, read.clusters, read.counts.thresholds
    is_bench = acts.groups == plan.benchmark
    is_ref = np.isin(acts.groups, entry["reference_groups"])
    rule = UncoveredRule.of(plan.rule)
    before = coverage_of_fired(fired, is_bench, is_ref, clusters, rule)
    if before.uncovered.reference.rows != stored["uncovered"]["reference"]["rows"]:
        return "scope/ does not give its own row view again (its rows changed?): rerun `cg-ray scope`"
    added = firing_indicators(_item_rows(kept, fired.shape[1]).tocsc(), thresholds)
    n = len(kept)
    after = coverage_of_fired(
        sparse.vstack([fired, added], format="csr"),
        np.concatenate([is_bench, np.ones(n, dtype=bool)]),
        np.concatenate([is_ref, np.zeros(n, dtype=bool)]),
        np.concatenate([clusters.astype(str), np.asarray([f"augment:{i}" for i in range(n)], dtype=str)]),
        rule,
    )
    return RowViewChange(before, after, n)
