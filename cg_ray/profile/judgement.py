"""One judgement of a run's findings, made once and frozen (docs/findings.md): the slices, the concepts and the
failure modes, each chosen on some rows and tested, as the same rule, on rows that did not choose it.

The recipe is one: `measure` (the metrics and, in the same pass over the activations, what the judgement needs:
`findings.ResidualPass` → `Gathered`), then `judge` (a second pass for the concepts any split may use, then
every verdict, the failure modes and their terms) → `Judgement`. `cg-ray metrics` / `run` (run_outputs.py),
`cg-ray validate`, the null check and the sensitivity check all take it from here (`judge_rows` is both steps
for rows outside a run's profile), so a summary can never count what a skipped stage left out.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cg_ray.artifacts.rows import RowsFile, accumulate_rows
from cg_ray.config import MetricsConfig
from cg_ray.labels import ConceptLabels
from cg_ray.metrics.compute import CGResult, compute_metrics
from cg_ray.profile.classterms import ClassTerms
from cg_ray.profile.decision import (
    DECISION,
    GAMMA,
    INTERVAL,
    Alternative,
    Observer,
    Verdict,
    not_tested,
    rank_key,
    typical_mde,
)
from cg_ray.profile.findings import (
    Gathered,
    ResidualPass,
    dropped_note,
    examples,
    modes_table,
    positions,
    verdict_columns,
)
from cg_ray.profile.pool import PoolRows
from cg_ray.profile.residual import Residuals
from cg_ray.profile.split_modes import split_modes
from cg_ray.profile.splits import CHOOSING_SHARE, SplitPlan
from cg_ray.profile.strata import RowFrame, cell_keys
from cg_ray.profile.terms import Terms
from cg_ray.profile.verdicts import ConceptKey, SliceFinding, concept_verdicts, slice_findings


@dataclass(frozen=True)
class Measured:
    result: CGResult
    gathered: Gathered  # metadata, in-sample residuals, the splits and each split's chosen concepts
    beyond_s: float  # the metadata, slices and splits, before the pass
    aggregate_s: float  # reading and accumulating the rows


def measure(
    rows: RowsFile,
    model: str | None,
    config: MetricsConfig,
    scores: npt.NDArray[np.float64] | None = None,
    residuals: ResidualPass | None = None,
) -> Measured:
    """The CG metrics and what the judgement needs, accumulated in the same pass (`scores` replaces the file's:
    the null check; `residuals`: the pass already set up from the light columns, not yet fed)."""
    started = time.perf_counter()
    if residuals is None:
        residuals = ResidualPass(rows, model, config, scores=scores)  # metadata, slices, adjusted fields, splits
    beyond_s = time.perf_counter() - started
    started = time.perf_counter()
    acc = accumulate_rows(rows, model=model, observe=residuals.observe)
    aggregate_s = time.perf_counter() - started
    result = compute_metrics(acc, config)
    return Measured(result, residuals.finish(result), beyond_s, aggregate_s)


@dataclass(frozen=True)
class Judgement:
    """Every finding of one run judged held out: built by `judge` and never changed after."""

    gathered: Gathered
    slice_findings: tuple[SliceFinding, ...]  # shown: confirmed first, near-duplicates dropped
    n_slice_candidates: int  # every slice some split tested (the slices' family), before de-duplication
    concept_verdicts: Mapping[ConceptKey, Verdict]  # every concept some split tested, by direction
    modes: pa.Table  # failure_modes.parquet: the modes shown
    n_mode_candidates: int
    n_modes_confirmed: int  # of every mode judged, not only those shown
    terms: Mapping[int, Terms]  # each concept asked for (the profile's) → its rows' distinctive terms
    firing_thresholds: Mapping[int, float]  # each concept asked for → the activation at which it fires
    notes: tuple[str, ...]

    @property
    def frame(self) -> RowFrame:
        return self.gathered.frame

    @property
    def plan(self) -> SplitPlan:
        return self.gathered.plan

    @property
    def residuals(self) -> Residuals:
        return self.gathered.residuals  # in sample, every row

    @property
    def adjusted_for(self) -> list[str]:
        return list(self.gathered.adjusted_for)

    def concept_verdict(self, c: int, direction: Alternative = "less") -> Verdict:
        return self.concept_verdicts.get(ConceptKey(c, direction), not_tested())

    def summary(self) -> dict[str, Any]:
        modes = self.modes.column("confirmed").to_pylist()
        adjusted = set(self.gathered.adjusted_for)
        return {
            "adjusted_for": self.adjusted_for,
            "notes": list(self.notes),
            "fields": {name: len(v) for name, v in self.frame.values.items()},
            "skipped_fields": self.frame.skipped,
            "n_slices": len(self.slice_findings),
            "n_failure_modes": len(modes),
            "judgement": {
                **self.plan.summary(),
                "decision": DECISION,
                "interval": INTERVAL,
                "candidates": {
                    "failure_modes": self.n_mode_candidates,
                    "slices": self.n_slice_candidates,
                    "concepts": len(self.concept_verdicts),
                },
                "confirmed": {
                    "failure_modes": self.n_modes_confirmed,
                    "slices": sum(f.verdict.confirmed for f in self.slice_findings),
                    "slices_beyond_adjusted": sum(
                        f.verdict.confirmed and not {name for name, _ in f.slice.conditions} <= adjusted
                        for f in self.slice_findings
                    ),
                    "concepts": sum(v.confirmed for v in self.concept_verdicts.values()),
                },
                "mde_by_size": self.mde_by_size(),
                "confirmed_concepts": self.confirmed_concepts(),
            },
        }

    def confirmed_concepts(self) -> list[dict[str, Any]]:
        """Every confirmed concept, most confidently first, whichever list shows it (the profile shows its top
        ones): the record later steps read instead of judging the rows again (validate, sensitivity)."""
        ranked = sorted(
            ((key, v) for key, v in self.concept_verdicts.items() if v.confirmed),
            key=lambda kv: (rank_key(kv[1]), kv[0]),
        )
        return [
            {"concept": key.concept, "direction": key.direction, "estimate": v.estimate, "low": v.low,
             "high": v.high, **verdict_columns(v)}
            for key, v in ranked
        ]  # fmt: skip

    def mde_by_size(self) -> list[dict[str, float | int | None]]:
        """The minimum detectable effect of a failure mode of typical sizes in this suite (80% power, as the
        first of a split's top-k candidates and its only rejection: the level γ·fdr over its weighted-BH factor,
        tested on the rows its split did not choose on), from the scores' mean variance within the cells
        adjusted for; groups of several rows raise it."""
        fr = self.frame
        if not fr.scored.any():
            return []
        cells = cell_keys(fr, self.adjusted_for)[fr.scored]
        y = fr.scores[fr.scored]
        n_c = np.bincount(cells).astype(np.float64)
        mean_c = np.bincount(cells, weights=y) / np.maximum(n_c, 1)
        variance = float(np.mean((y - mean_c[cells]) ** 2))
        # The first of a split's top-k modes pays weighted BH's k / w₁ = H(k) at most (weights ∝ 1/rank, mean 1).
        factor = float(np.sum(1.0 / np.arange(1, self.gathered.tested_per_split + 1)))
        level = GAMMA * self.plan.fdr / factor
        sizes = [n for n in (50, 100, 200, 400, 800, 1600) if n <= fr.scored.sum() / 2]
        test = 1.0 - CHOOSING_SHARE
        return [{"n_rows": n, "mde": typical_mde(n, int(fr.scored.sum()), variance, level, test)} for n in sizes]


def judge(
    rows: RowsFile,
    model: str | None,
    gathered: Gathered,
    cfg: MetricsConfig,
    describe: Sequence[int] = (),
    labels: ConceptLabels | None = None,
    seed: int = 0,
    observe: Observer | None = None,
) -> Judgement:
    """Every verdict of the run: the slices, then (one more pass over the activations of the concepts any
    split may use, and of `describe`: the profile's, which get their distinctive terms) the concepts and the
    failure modes, built, judged and described. `observe` sees every call of the decision rule."""
    frame = gathered.frame
    slices, n_slice_candidates = slice_findings(frame, gathered.plan, cfg, observe)
    notes = list(gathered.notes)
    if note := dropped_note([f.verdict for f in slices], "slices"):
        notes.append(note)
    pool = PoolRows(gathered.candidates.pool() | {int(c) for c in describe}, rows.d_sae)
    for _, batch in positions(rows, model, frame):
        pool.add(batch.offsets, batch.concept_ids, batch.concept_acts)
    pool.finish()
    terms_of = ClassTerms(rows, frame, list(gathered.adjusted_for), seed)
    chosen_below = [[int(c) for c in below] for below in gathered.candidates.below]
    found = split_modes(gathered.plan, frame, chosen_below, pool, terms_of, cfg, observe)
    shown = sorted(found, key=lambda m: rank_key(m[1]))[: cfg.top_k]
    if note := dropped_note([v for _, v in shown], "failure modes"):
        notes.append(note)
    wanted: dict[object, tuple[Any, Any]] = {m.members: pool.members(m.members) for m, _ in shown}
    wanted.update({(int(c),): pool.members([int(c)]) for c in describe})
    terms = terms_of.compute(wanted)
    named = {c: lab for m, _ in shown for c in m.members if (lab := labels.get(c) if labels else None)}
    rng = np.random.default_rng(seed)
    modes = modes_table(
        [(m, v, terms[m.members], examples(m, gathered, rng)) for m, v in shown],
        gathered,
        named,
        {m.members: pool.firing_thresholds(m.members) for m, _ in shown},
    )
    return Judgement(
        gathered,
        tuple(slices),
        n_slice_candidates,
        concept_verdicts(gathered.candidates, pool, gathered.plan, observe),
        modes,
        len(found),
        sum(v.confirmed for _, v in found),
        {int(c): terms[(int(c),)] for c in describe},
        {int(c): pool.firing_thresholds([int(c)])[0] for c in describe},
        tuple(notes),
    )


def judge_rows(
    rows: RowsFile,
    cfg: MetricsConfig,
    model: str | None = None,
    scores: npt.NDArray[np.float64] | None = None,
    observe: Observer | None = None,
) -> Judgement:
    """Slices, concepts and failure modes of `rows`, judged held out (`scores` replaces the file's): the run's
    judgement without its profile (no concept asked to be described; `observe`: as `judge`)."""
    measured = measure(rows, model, cfg, scores)
    return judge(rows, model, measured.gathered, cfg, observe=observe)
