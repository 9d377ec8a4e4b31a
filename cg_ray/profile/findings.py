"""Beyond what the metadata says: slices, residual gaps, failure modes and distinctive terms of one run, each
finding chosen on some rows and tested, as the same rule, on rows that did not choose it (docs/findings.md).

`ResidualPass` reads rows.parquet's light columns once (`strata.read_frame`), picks the fields to adjust for
(the in-sample figures shown), plans the repeated grouped splits (`splits.plan_splits`: each split picks its
own fields and cell means on its choosing half) and accumulates the residual sums per part and per split from
the batches of the metrics' own pass over the activations; `finish` returns what was gathered, frozen
(`Gathered`: the concepts each split chose among them). `judgement.judge` then makes the findings from it.
This module also lays the judged failure modes and slices out as their files (`modes_table`, `slices_file`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.row_batch import RowBatch
from cg_ray.artifacts.rows import RowsFile, iter_row_batches
from cg_ray.config import MetricsConfig
from cg_ray.metrics.compute import CGResult
from cg_ray.profile.classterms import TEXT_COLUMNS, read_texts
from cg_ray.profile.decision import (
    Verdict,
)
from cg_ray.profile.modes import ModeClass
from cg_ray.profile.ranking import eligible
from cg_ray.profile.residual import ResidualAccumulator, Residuals, residual_order
from cg_ray.profile.slices import Slice, best_fields, example_rows, weakest_slices
from cg_ray.profile.splits import SplitPlan, plan_splits
from cg_ray.profile.strata import RowFrame, expected_scores, parse_adjust_for, read_frame
from cg_ray.profile.terms import Terms
from cg_ray.profile.verdicts import (
    ConceptCandidates,
    SliceFinding,
    concept_candidates,
)

__all__ = ["TEXT_COLUMNS", "Gathered", "ResidualPass", "read_texts", "slices_file"]

EXAMPLES = 3


@dataclass(frozen=True)
class Gathered:
    """What the metrics' pass gathered for the judgement, before anything is judged: the metadata frame, the
    in-sample figures shown beside the findings, the splits and the concepts each split chose."""

    frame: RowFrame
    slices: tuple[Slice, ...]  # in-sample, for `--adjust-for auto`
    adjusted_for: tuple[str, ...]
    notes: tuple[str, ...]
    expected: npt.NDArray[np.float64]
    residuals: Residuals  # in-sample, every row
    order: npt.NDArray[np.int64]  # eligible concepts with a negative residual, most confidently first
    plan: SplitPlan
    candidates: ConceptCandidates
    tested_per_split: int


class ResidualPass:
    """The residual gaps, accumulated batch by batch beside the metrics' own pass (`observe` is handed every
    batch the aggregation streams), per part and per split, so the activations are read once for all. The
    metadata frame, the fields adjusted for, the splits and their cell means come first, from the light
    columns alone."""

    def __init__(
        self, rows: RowsFile, model: str | None, cfg: MetricsConfig, scores: npt.NDArray[np.float64] | None = None
    ) -> None:
        self.frame = read_frame(rows, model)
        if scores is not None:  # the null check: the same rows with other scores (same rows scored)
            self.frame.scores = np.asarray(scores, dtype=np.float64)
        fr = self.frame
        self.cfg = cfg
        self.slices = weakest_slices(fr, cfg.top_k, cfg.slice_order, cfg.slice_min_rows) if fr.codes else []
        self.adjusted_for, self.notes = parse_adjust_for(cfg.adjust_for, fr, best_fields(self.slices))
        self.expected = expected_scores(fr, self.adjusted_for)
        self.plan = plan_splits(rows, fr, cfg)
        self.notes += self.plan.notes
        if self.plan.skipped:
            self.notes.append(self.plan.skipped)
        self.acc = ResidualAccumulator(rows.d_sae, parts=self.plan.n_parts, splits=len(self.plan.splits))
        self.seen = 0
        self.path = rows.path

    def observe(self, batch: RowBatch) -> None:
        here = slice(self.seen, self.seen + len(batch))
        self.acc.add(
            batch.offsets,
            batch.concept_ids,
            batch.concept_acts,
            self.frame.scores[here],  # the frame's: the batch's own unless the null check replaced them
            self.expected[here],
            self.plan.part[here],
            [split.expected_at(here) for split in self.plan.splits],
            [split.choosing[here] for split in self.plan.splits],
        )
        self.seen += len(batch)

    def finish(self, result: CGResult) -> Gathered:
        _check_streamed(self.path, self.seen, self.frame)
        res = self.acc.finish()
        return Gathered(
            self.frame,
            tuple(self.slices),
            tuple(self.adjusted_for),
            tuple(self.notes),
            self.expected,
            res,
            residual_order(res, eligible(result) & (np.nan_to_num(res.residual) < 0)),
            self.plan,
            concept_candidates(self.acc, result, self.plan, self.cfg.tested_per_split),
            self.cfg.tested_per_split,
        )


def dropped_note(verdicts: Sequence[Verdict], kind: str) -> str | None:
    """How many findings shown lost rows from their contrasts because they fill a cell (no other row there to
    compare with); None when none did. A finding that fills its cells restates the metadata there."""
    hit = [v.n_dropped for v in verdicts if v.n_dropped]
    if not hit:
        return None
    return (
        f"{len(hit)} of the {len(verdicts)} {kind} shown fill some of their cells in a test half (median split): "
        f"their {sum(hit):,} rows there have no other row to be compared with and are left out of the contrasts "
        "(in those cells the finding is the metadata itself)"
    )


def positions(rows: RowsFile, model: str | None, frame: RowFrame) -> Iterator[tuple[int, RowBatch]]:
    """(first frame position, batch) over the model's rows; the frame holds the same rows in the same order."""
    start = 0
    for batch in iter_row_batches(rows, model=model):
        yield start, batch
        start += len(batch)
    _check_streamed(rows.path, start, frame)


def _check_streamed(path: Path, seen: int, frame: RowFrame) -> None:
    if seen != frame.n_rows:  # the activations and the metadata frame must be the same rows, in order
        raise RuntimeError(f"{path}: {seen} rows streamed but {frame.n_rows} in the metadata frame")


def examples(mode: ModeClass, gathered: Gathered, rng: np.random.Generator) -> list[str]:
    """A seeded random draw of the mode's rows that score below their cell: what its failing rows look like,
    not the ones picked to show its terms."""
    pos = mode.rows
    r = gathered.frame.scores[pos] - gathered.expected[pos]
    failing = pos[np.nan_to_num(r, nan=0.0) < 0]
    if failing.size == 0:
        return []
    picked = np.sort(rng.choice(failing, size=min(EXAMPLES, failing.size), replace=False))
    return [gathered.frame.row_id(int(p)) for p in picked]


def _f(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def mode_description(terms: Terms, members: Sequence[int], labels: dict[int, str]) -> str:
    # The terms alone: each term's share of the mode's rows (and of its cells' other rows) is shown beside it.
    sentence = "Rows with " + ", ".join(f"“{t}”" for t in terms.terms) if terms.terms else None
    # Free-text labels only: a token-list label ("'-' | 'ix' | '2'") comes from the SAE's labelling corpus and
    # says less about these rows than their own terms.
    named = [labels[c] for c in members if labels.get(c) and " | " not in labels[c]]
    if sentence and named:
        return f"{sentence}; concepts: {', '.join(named[:2])}"
    if sentence:
        return sentence
    if named:
        return f"Rows where {', '.join(named[:2])}"
    return f"Rows where concept{'s' if len(members) > 1 else ''} {', '.join(map(str, members[:3]))} fire"


def _on_score_scale(x: float | None, baseline: float | None) -> float | None:
    """A slice's contrast (its mean − the test half's other rows') back on the score scale."""
    if x is None or baseline is None or not np.isfinite(x):
        return None
    return float(np.clip(baseline + x, 0.0, 1.0))


def verdict_columns(v: Verdict) -> dict[str, Any]:
    return {
        "p_value": v.p_value,
        "q_value": v.q_value,
        "confirmed": v.confirmed,
        "splits_selected": v.splits_selected,
        "n_heldout": v.n_heldout,
        "n_clusters": v.n_clusters,
        "mde": v.mde,
    }


def modes_table(
    modes: list[tuple[ModeClass, Verdict, Terms, list[str]]],
    gathered: Gathered,
    labels: dict[int, str] | None = None,
    thresholds: dict[tuple[int, ...], list[float]] | None = None,
) -> pa.Table:
    fr = gathered.frame
    records = []
    for rank, (m, v, t, ex) in enumerate(modes, start=1):
        scored = m.rows[fr.scored[m.rows]]
        mean = float(fr.scores[scored].mean()) if scored.size else None
        expected = float(gathered.expected[scored].mean()) if scored.size else None
        records.append(
            {
                "rank": rank,
                "description": mode_description(t, m.members, labels or {}),
                "terms": t.terms,
                "term_shares": t.share,
                "background_shares": t.background,
                "concept_ids": list(m.members),
                "firing_thresholds": (thresholds or {}).get(m.members),
                "n_rows": int(m.rows.size),
                "n_scored": int(scored.size),
                "mean_score": mean,
                "expected_score": expected,
                "heldout_residual": _f(v.estimate),
                "heldout_residual_low": _f(v.low),
                "heldout_residual_high": _f(v.high),
                "in_sample_residual": None if mean is None or expected is None else mean - expected,
                **verdict_columns(v),
                "adjusted_for": list(gathered.adjusted_for),
                "example_row_ids": ex,
            }
        )
    return pa.Table.from_pylist(records, schema=S.FAILURE_MODES_SCHEMA)


def slices_file(frame: RowFrame, findings: Sequence[SliceFinding]) -> pa.Table:
    fr = frame
    records = [
        {
            "rank": rank,
            "slice": f.slice.text(fr),
            "conditions": json.dumps(f.slice.as_dict(fr), ensure_ascii=False),
            "n_rows": f.slice.n_rows,
            "mean_score": _on_score_scale(f.verdict.estimate, f.verdict.baseline),
            "low": _on_score_scale(f.verdict.low, f.verdict.baseline),
            "high": _on_score_scale(f.verdict.high, f.verdict.baseline),
            "mean_in_sample": f.slice.mean_score,
            "suite_mean": f.verdict.baseline,
            "contrast": _f(f.verdict.estimate),
            "contrast_low": _f(f.verdict.low),
            "contrast_high": _f(f.verdict.high),
            **verdict_columns(f.verdict),
            "example_row_ids": example_rows(fr, f.slice.mask(fr)),
        }
        for rank, f in enumerate(findings, start=1)
    ]
    return pa.Table.from_pylist(records, schema=S.SLICES_SCHEMA)
