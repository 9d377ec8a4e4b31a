"""Which rows each finding of a run flags (docs/sensitivity.md): the run's confirmed findings, and another
reader's candidates, confirmed or not, with their q-values (what a near miss is measured by).

A finding is a rule on rows: a failure mode's rows are those where one of its member concepts fires, a
concept's those where it fires (`metrics.firing`, thresholds over the run's own rows), a slice's those with its
metadata values. Concept ids of two readers do not correspond, rows do: the comparison (`compare`) is on rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cg_ray import schemas as S
from cg_ray.arrays import IntArray
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.renamed import judgement_of
from cg_ray.artifacts.rows import RowsFile, iter_row_batches, open_rows
from cg_ray.config import MetricsConfig
from cg_ray.profile.decision import GREATER, LESS, Alternative
from cg_ray.profile.findings import ResidualPass
from cg_ray.profile.judgement import judge_rows
from cg_ray.profile.pool import PoolRows
from cg_ray.profile.splits import SplitPlan
from cg_ray.profile.strata import MISSING, RowFrame

SLICE = "slice"  # a metadata rule: every reader finds the same rows


@dataclass(frozen=True)
class Finding:
    kind: str  # failure_mode | slice | concept
    key: str  # mode:RANK | slice:RANK | concept:ID
    description: str
    direction: Alternative
    rows: IntArray  # frame positions, ascending
    q_value: float | None = None  # its held-out q (None: not recorded)
    confirmed: bool = True


@dataclass(frozen=True)
class _Concept:
    concept: int
    direction: Alternative
    q_value: float | None
    confirmed: bool


@dataclass(frozen=True)
class ReaderFindings:
    """One reader's run over the rows: its findings (the run's: confirmed ones; another reader's: every
    candidate its files record), its splits, and how many rows the frame holds."""

    findings: list[Finding]
    plan: SplitPlan
    n_rows: int

    @property
    def confirmed(self) -> list[Finding]:
        return [f for f in self.findings if f.confirmed]

    @classmethod
    def open(cls, run: RunDir, model: str | None, config: MetricsConfig, *, candidates: bool) -> ReaderFindings:
        rows = open_rows(run.rows)
        return cls(*read_findings(run, rows, model, config, candidates=candidates), rows.n_rows)


def read_findings(
    run: RunDir, rows: RowsFile, model: str | None, config: MetricsConfig, *, candidates: bool = False
) -> tuple[list[Finding], SplitPlan]:
    """The run's failure modes and slices (as its files rank them) and concepts (every one its judgement
    confirmed, shown in its profile or not: summary.json's record; with `candidates`, also those its profiles
    show unconfirmed), with their rows and q-values; and the run's splits, planned again from the light
    columns. Without `candidates` only confirmed findings."""
    residuals = ResidualPass(rows, model, config)  # the run's groups and splits: no pass over the activations
    concepts = _concepts(run, rows, model, config, candidates)
    modes = _entries(run, S.FAILURE_MODES_FILE, candidates)
    pool = _pool(rows, model, [c for m in modes for c in m["concept_ids"]] + [c.concept for c in concepts])
    out = [
        Finding(
            "failure_mode", f"mode:{m['rank']}", m["description"], LESS, pool.members(m["concept_ids"])[0],
            _q(m), bool(m.get("confirmed")),
        )
        for m in modes
    ]  # fmt: skip
    out += [
        Finding(
            SLICE, f"slice:{s['rank']}", s["slice"], LESS, slice_rows(residuals.frame, json.loads(s["conditions"])),
            _q(s), bool(s.get("confirmed")),
        )
        for s in _entries(run, S.SLICES_FILE, candidates)
    ]  # fmt: skip
    names = _concept_names(run)
    for c in concepts:
        name = names.get(c.concept) or f"concept {c.concept}"
        rows_of = pool.firing(c.concept)[0]
        out.append(Finding("concept", f"concept:{c.concept}", name, c.direction, rows_of, c.q_value, c.confirmed))
    return out, residuals.plan


def _q(entry: dict[str, Any]) -> float | None:
    q = entry.get("q_value")
    return None if q is None or q != q else float(q)


def _concepts(
    run: RunDir, rows: RowsFile, model: str | None, config: MetricsConfig, candidates: bool
) -> list[_Concept]:
    """Confirmed concepts (summary.json's record, else the judgement made again: a run before format 3), then
    with `candidates` the profiles' unconfirmed ones that were tested (a q-value), each (concept, direction)
    once."""
    recorded = recorded_concepts(run) if run.has(S.SUMMARY_FILE) else None
    if recorded is None:
        recorded = judge_rows(rows, config, model).confirmed_concepts()
    found = {
        (int(c["concept"]), c["direction"]): _Concept(int(c["concept"]), c["direction"], _q(c), True) for c in recorded
    }
    if candidates:
        for name, direction in ((S.WEAKNESSES_FILE, LESS), (S.STRENGTHS_FILE, GREATER)):
            for e in _entries(run, name, candidates=True):
                key = (int(e["concept_id"]), direction)
                if key not in found and _q(e) is not None:
                    found[key] = _Concept(key[0], direction, _q(e), bool(e.get("confirmed")))
    return list(found.values())


def recorded_concepts(run: RunDir) -> list[dict[str, Any]] | None:
    """The concepts the run's judgement confirmed, as summary.json records them (None: not recorded)."""
    judged = judgement_of(run.read_summary())
    recorded = (judged or {}).get("confirmed_concepts")
    return None if recorded is None else [dict(c) for c in recorded]


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


def _entries(run: RunDir, name: str, candidates: bool) -> list[dict[str, Any]]:
    """A profile file's entries that were judged (a `confirmed` column): all of them, or the confirmed ones."""
    table = run.read_table(name)
    if table is None or "confirmed" not in table.column_names:
        return []
    return [e for e in table.to_pylist() if candidates or e.get("confirmed")]


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


def headline(findings: Iterable[Finding]) -> list[Finding]:
    """The findings a reader's SAE makes (failure modes, concepts): slices are metadata rules any reader finds."""
    return [f for f in findings if f.kind != SLICE]
