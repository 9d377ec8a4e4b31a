"""Which rows each confirmed finding of a run flags, and whether another reader's run confirms a finding on the
same rows (docs/sensitivity.md).

A finding is a rule on rows: a failure mode's rows are those where one of its member concepts fires, a
concept's those where it fires (`metrics.firing`, thresholds over the run's own rows), a slice's those with its
metadata values. Concept ids of two readers do not correspond, rows do: so a finding replicates when the other
reader confirms a finding, of any kind, leaning the same way, whose rows overlap it (Jaccard ≥ `REPLICATES_AT`);
it partly replicates when such a finding flags at least `COVERED_AT` of its rows without the overlap. Beside
the match, the run's own rows are judged as one fixed rule under the other run's splits (`decision.judge` on
each split's test half, nothing chosen), the figure a user acts on whichever reader names the rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.arrays import IntArray
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.renamed import judgement_of
from cg_ray.artifacts.rows import RowsFile, iter_row_batches, open_rows
from cg_ray.config import MetricsConfig
from cg_ray.profile.decision import LESS, Alternative, Verdict, judge, not_tested
from cg_ray.profile.findings import ResidualPass
from cg_ray.profile.judgement import judge_rows
from cg_ray.profile.pool import PoolRows
from cg_ray.profile.splits import SplitPlan
from cg_ray.profile.strata import MISSING, RowFrame
from cg_ray.profile.verdicts import ConceptKey

REPLICATES_AT = 0.5  # Jaccard of flagged rows
COVERED_AT = 0.5  # share of the run's rows a partial match flags
RULE = (
    f"replicates: the other reader confirms a finding (any kind, same direction) whose flagged rows overlap it with "
    f"Jaccard >= {REPLICATES_AT}; partly: one flags >= {COVERED_AT:.0%} of its rows but overlaps less; not found: "
    "neither. effect: the run's own rows judged as one fixed rule on the other run's test halves."
)


@dataclass(frozen=True)
class Finding:
    kind: str  # failure_mode | slice | concept
    key: str  # mode:RANK | slice:RANK | concept:ID
    description: str
    direction: Alternative
    rows: IntArray  # frame positions, ascending


def confirmed_findings(
    run: RunDir, rows: RowsFile, model: str | None, config: MetricsConfig
) -> tuple[list[Finding], SplitPlan]:
    """The run's confirmed failure modes and slices (as its files rank them), every concept it confirms
    (weaknesses and strengths, shown in its profile or not: the judgement's record in summary.json), with their
    rows; and the run's splits (they test the fixed rules), planned again from the light columns."""
    residuals = ResidualPass(rows, model, config)  # the run's groups and splits: no pass over the activations
    concepts = recorded_concepts(run) if run.has(S.SUMMARY_FILE) else None
    if concepts is None:  # a run before summary.json recorded them (format 3): its judgement made again
        judged = judge_rows(rows, config, model)
        concepts = [ConceptKey(int(c["concept"]), c["direction"]) for c in judged.confirmed_concepts()]
    modes = _confirmed(run, S.FAILURE_MODES_FILE)
    pool = _pool(rows, model, [c for m in modes for c in m["concept_ids"]] + [key.concept for key in concepts])
    out = [
        Finding("failure_mode", f"mode:{m['rank']}", m["description"], LESS, pool.members(m["concept_ids"])[0])
        for m in modes
    ]
    out += [
        Finding(
            "slice", f"slice:{s['rank']}", s["slice"], LESS, slice_rows(residuals.frame, json.loads(s["conditions"]))
        )
        for s in _confirmed(run, S.SLICES_FILE)
    ]
    names = _concept_names(run)
    for key in concepts:
        name = names.get(key.concept) or f"concept {key.concept}"
        out.append(Finding("concept", f"concept:{key.concept}", name, key.direction, pool.firing(key.concept)[0]))
    return out, residuals.plan


def recorded_concepts(run: RunDir) -> list[ConceptKey] | None:
    """The concepts the run's judgement confirmed, as summary.json records them (None: not recorded)."""
    judged = judgement_of(run.read_summary())
    recorded = (judged or {}).get("confirmed_concepts")
    if recorded is None:
        return None
    return [ConceptKey(int(c["concept"]), c["direction"]) for c in recorded]


def _concept_names(run: RunDir) -> dict[int, str]:
    """Each concept's description where the profile shows one, else its label."""
    names: dict[int, str] = {}
    for name in (S.CONCEPTS_FILE, S.STRENGTHS_FILE, S.WEAKNESSES_FILE):  # later files win: their descriptions
        table = run.read_table(name)
        if table is None:
            continue
        for e in table.to_pylist():
            if text := e.get("description") or e.get("label"):
                names[int(e["concept_id"])] = str(text)
    return names


def _confirmed(run: RunDir, name: str) -> list[dict[str, Any]]:
    table = run.read_table(name)
    if table is None or "confirmed" not in table.column_names:
        return []
    return [e for e in table.to_pylist() if e.get("confirmed")]


def _pool(rows: RowsFile, model: str | None, concepts: Sequence[object]) -> PoolRows:
    pool = PoolRows([int(str(c)) for c in concepts], rows.d_sae)
    for batch in iter_row_batches(rows, model=model):
        pool.add(batch.offsets, batch.concept_ids, batch.concept_acts)
    return pool.finish()


def slice_rows(frame: RowFrame, conditions: dict[str, str]) -> IntArray:
    """Frame positions of the rows holding every (field = value) of a slice."""
    keep = np.ones(frame.n_rows, bool)
    for name, value in conditions.items():
        codes = frame.codes.get(name)
        if codes is None:
            return np.zeros(0, np.int64)
        values = frame.values[name]
        code = -1 if value == MISSING else (values.index(value) if value in values else -2)
        keep &= codes == code
    return np.flatnonzero(keep).astype(np.int64)


@dataclass(frozen=True)
class OtherReader:
    """Another reader's run over the same rows: its confirmed findings and its splits."""

    findings: list[Finding]
    plan: SplitPlan

    @classmethod
    def open(cls, run: RunDir, model: str | None, config: MetricsConfig) -> OtherReader:
        return cls(*confirmed_findings(run, open_rows(run.rows), model, config))


def fixed_rule_verdict(finding: Finding, other: OtherReader) -> Verdict:
    """The finding's own rows as one rule tested on each split's test half of the other run (nothing chosen:
    a family of one), within the cells each split adjusts for (a slice: against the half's other rows)."""
    plan = other.plan
    per_split = []
    for split in plan.splits:
        half = split.whole if finding.kind == "slice" else split.by_cell
        per_split.append([(finding.key, half.contrast(finding.rows, None, finding.direction), 1)])
    verdicts = judge(per_split, plan.n_splits, plan.fdr, (-1.0, 1.0))
    return verdicts.get(finding.key) or not_tested()


def compare_finding(finding: Finding, reader: str, other: OtherReader) -> dict[str, object]:
    """One row of findings.parquet: the best-overlapping confirmed finding of the other reader, and the effect."""
    best: tuple[float, float, Finding] | None = None
    for theirs in other.findings:
        if theirs.direction != finding.direction:
            continue
        inter = np.intersect1d(finding.rows, theirs.rows, assume_unique=True).size
        union = finding.rows.size + theirs.rows.size - inter
        overlap = (inter / union if union else 0.0, inter / finding.rows.size if finding.rows.size else 0.0)
        if best is None or overlap > best[:2]:
            best = (*overlap, theirs)
    jaccard, covered = (best[0], best[1]) if best else (None, None)
    if best and best[0] >= REPLICATES_AT:
        status = S.REPLICATES
    elif best and best[1] >= COVERED_AT:
        status = S.PARTLY
    else:
        status = S.NOT_FOUND
    verdict = fixed_rule_verdict(finding, other)
    return {
        "kind": finding.kind,
        "finding": finding.key,
        "description": finding.description,
        "n_rows": int(finding.rows.size),
        "reader": reader,
        "status": status,
        "match": best[2].key if best and best[1] > 0 else None,
        "match_description": best[2].description if best and best[1] > 0 else None,
        "jaccard": jaccard,
        "covered": covered,
        "effect": verdict.estimate,
        "effect_low": verdict.low,
        "effect_high": verdict.high,
        "effect_confirmed": bool(verdict.confirmed),
    }


def findings_table(rows: list[dict[str, object]]) -> pa.Table:
    from cg_ray.sensitivity.tables import FINDINGS_SCHEMA

    return pa.Table.from_pylist(rows, schema=FINDINGS_SCHEMA)
