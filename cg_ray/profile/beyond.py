"""Beyond what the metadata says: slices, residual gaps, failure modes and distinctive terms of one run.

`ResidualPass` reads rows.parquet's light columns once (`strata.read_frame`), finds the weakest slices,
picks the fields to adjust for, and accumulates the residual gaps from the batches of the metrics' own pass
over the activations. `describe_classes` then streams them once more for the failure modes' groups
(active-row Jaccard) and once for the row statistics and example rows of every class (the modes and the
profile entries), and reads the texts of the kept rows and a seeded background sample for their distinctive
terms. Every pass is O(batch) in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.row_batch import RowBatch
from cg_ray.artifacts.rows import RowsFile, iter_row_batches
from cg_ray.config import MetricsConfig
from cg_ray.labels import ConceptLabels
from cg_ray.metrics.compute import CGResult
from cg_ray.profile.grouping import pool_activity_from_rows
from cg_ray.profile.modes import (
    DUPLICATE_JACCARD,
    ClassStats,
    ClassSummary,
    fold_variants,
    group_modes,
    rank_modes,
    summarise,
)
from cg_ray.profile.ranking import eligible
from cg_ray.profile.residual import ResidualAccumulator, Residuals, residual_order
from cg_ray.profile.slices import Slice, best_fields, slices_table, weakest_slices
from cg_ray.profile.strata import RowFrame, expected_scores, parse_adjust_for, read_frame
from cg_ray.profile.terms import Terms, distinctive_terms, terms_present

POOL_FACTOR = 4  # residual-ranked concepts grouped into modes, per mode reported
VARIANT_FACTOR = 2  # modes whose terms are read, per mode reported (the rest may fold as variants)
BACKGROUND_ROWS = 2000  # rows of the suite the terms are contrasted with
EXAMPLES = 3
TEXT_COLUMNS = ("prompt", "response")


@dataclass
class Beyond:
    frame: RowFrame
    slices: list[Slice]
    adjusted_for: list[str]
    notes: list[str]
    expected: npt.NDArray[np.float64]
    residuals: Residuals
    order: npt.NDArray[np.int64]  # eligible concepts with a negative residual, most confidently first
    modes: pa.Table | None = None
    terms: dict[int, Terms] = field(default_factory=dict)  # profile concept → its rows' distinctive terms

    def summary(self) -> dict[str, Any]:
        return {
            "adjusted_for": self.adjusted_for,
            "notes": self.notes,
            "fields": {name: len(v) for name, v in self.frame.values.items()},
            "skipped_fields": self.frame.skipped,
            "n_slices": len(self.slices),
            "n_failure_modes": 0 if self.modes is None else self.modes.num_rows,
        }


class ResidualPass:
    """The residual gaps, accumulated batch by batch beside the metrics' own pass (`observe` is handed every
    batch the aggregation streams), so the activations are read once for both. The metadata frame, the
    slices and the cell means come first, from the light columns alone."""

    def __init__(self, rows: RowsFile, model: str | None, cfg: MetricsConfig) -> None:
        self.frame = read_frame(rows, model)
        fr = self.frame
        self.slices = weakest_slices(fr, cfg.top_k, cfg.slice_order, cfg.slice_min_rows) if fr.codes else []
        self.adjusted_for, self.notes = parse_adjust_for(cfg.adjust_for, fr, best_fields(self.slices))
        self.expected = expected_scores(fr, self.adjusted_for)
        self.acc = ResidualAccumulator(rows.d_sae)
        self.seen = 0
        self.path = rows.path

    def observe(self, batch: RowBatch) -> None:
        e = self.expected[self.seen : self.seen + len(batch)]
        self.acc.add(batch.offsets, batch.concept_ids, batch.concept_acts, batch.scores, e)
        self.seen += len(batch)

    def finish(self, result: CGResult) -> Beyond:
        _check_streamed(self.path, self.seen, self.frame)
        res = self.acc.finish()
        order = residual_order(res, eligible(result) & (np.nan_to_num(res.residual) < 0))
        return Beyond(self.frame, self.slices, self.adjusted_for, self.notes, self.expected, res, order)


def _positions(rows: RowsFile, model: str | None, frame: RowFrame) -> Any:
    """(first frame position, batch) over the model's rows; the frame holds the same rows in the same order."""
    start = 0
    for batch in iter_row_batches(rows, model=model):
        yield start, batch
        start += len(batch)
    _check_streamed(rows.path, start, frame)


def _check_streamed(path: Path, seen: int, frame: RowFrame) -> None:
    if seen != frame.n_rows:  # the activations and the metadata frame must be the same rows, in order
        raise RuntimeError(f"{path}: {seen} rows streamed but {frame.n_rows} in the metadata frame")


def describe_classes(
    rows: RowsFile,
    model: str | None,
    beyond: Beyond,
    cfg: MetricsConfig,
    concepts: Sequence[int],
    labels: ConceptLabels | None = None,
    seed: int = 0,
) -> None:
    """Fill `beyond.modes` (failure_modes.parquet) and `beyond.terms` (for the given profile concepts)."""
    head = [int(c) for c in beyond.order[: POOL_FACTOR * cfg.top_k]]
    groups = group_modes(head, pool_activity_from_rows(rows, head, model), cfg.mode_jaccard) if head else []
    classes: list[list[int]] = groups + [[int(c)] for c in concepts]
    if not classes:
        beyond.modes = modes_table([], [], [], [], beyond)
        return
    stats = ClassStats(classes, rows.d_sae)
    for start, batch in _positions(rows, model, beyond.frame):
        positions = np.arange(start, start + len(batch))
        stats.add(
            batch.offsets, batch.concept_ids, batch.concept_acts, positions, batch.scores, beyond.expected[positions]
        )
    summary = summarise(stats)
    # Terms for twice the modes reported: those that read as a better mode's become its variants, and the
    # next distinct ones take their places.
    folded = rank_modes(groups, summary[: len(groups)], stats.inter, DUPLICATE_JACCARD)[: VARIANT_FACTOR * cfg.top_k]
    members_of = dict(folded)
    wanted = list(members_of) + list(range(len(groups), len(classes)))
    terms, texts = class_terms(rows, beyond.frame, stats, wanted, seed)
    beyond.terms = {int(classes[k][0]): terms[k] for k in range(len(groups), len(classes))}
    ranked = fold_variants(list(members_of), {k: terms[k].terms for k in members_of})[: cfg.top_k]
    beyond.modes = modes_table(
        [members_of[k] for k, _ in ranked],
        [summary[k] for k, _ in ranked],
        [terms[k] for k, _ in ranked],
        [_examples(stats, k, beyond, terms[k].terms, texts) for k, _ in ranked],
        beyond,
        {c: lab for k, _ in ranked for c in members_of[k] if (lab := labels.get(c) if labels else None)},
        # A look-alike whose rows do not score below their cells is no other face of the failure: not shown.
        [
            [_variant(members_of[v], summary[v], terms[v]) for v in variants if _below(summary[v])]
            for _, variants in ranked
        ],
    )


def _below(s: ClassSummary) -> bool:
    return s.residual is not None and s.residual < 0


def _variant(members: list[int], s: ClassSummary, terms: Terms) -> dict[str, Any]:
    return {
        "concept_ids": members,
        "n_rows": s.n_rows,
        "residual": _f(s.residual),
        "residual_high": _f(s.high),
        "terms": terms.terms,
    }


def _examples(stats: ClassStats, k: int, beyond: Beyond, terms: Sequence[str], texts: dict[int, str]) -> list[str]:
    """The class's most activating rows, those that fall below their cell and show one of its terms first:
    an example should show the failure its description names (a mode's strongest rows need not contain its
    terms: they are the rows' shared words, not every row's)."""
    pos, _ = stats.top_rows(k)
    r = np.nan_to_num(beyond.frame.scores[pos] - beyond.expected[pos], nan=0.0)
    shows = np.array([terms_present(texts.get(int(p), ""), terms) > 0 for p in pos], dtype=bool)
    order = np.lexsort((np.arange(pos.size), ~shows, r >= 0))  # failing first, then showing a term, by weight
    return [beyond.frame.row_id(int(p)) for p in pos[order][:EXAMPLES]]


def class_terms(
    rows: RowsFile, frame: RowFrame, stats: ClassStats, wanted: Sequence[int], seed: int
) -> tuple[dict[int, Terms], dict[int, str]]:
    """Distinctive terms of the wanted classes (empty when rows.parquet holds no texts), and the texts read:
    frame position -> text, for the classes' kept rows and the background."""
    columns = [c for c in TEXT_COLUMNS if c in rows.parquet.schema_arrow.names]
    if not columns or not wanted:
        return {k: Terms([], [], []) for k in wanted}, {}
    rng = np.random.default_rng(seed)
    background = np.sort(rng.choice(frame.n_rows, size=min(BACKGROUND_ROWS, frame.n_rows), replace=False))
    tops = {k: stats.top_rows(k) for k in wanted}
    needed = np.unique(np.concatenate([background, *(p for p, _ in tops.values())]))
    texts = read_texts(rows, frame.file_rows[needed], columns)
    local = {int(p): i for i, p in enumerate(needed)}
    classes = [(np.array([local[int(p)] for p in pos], dtype=np.int64), w) for pos, w in tops.values()]
    bg = np.array([local[int(p)] for p in background], dtype=np.int64)
    found = distinctive_terms(texts, classes, bg)
    return dict(zip(tops, found, strict=True)), {int(p): texts[i] for i, p in enumerate(needed)}


def read_texts(rows: RowsFile, file_rows: npt.NDArray[np.int64], columns: Sequence[str]) -> list[str]:
    """The texts (columns joined by a blank line) of the given sorted file rows, streamed by row group."""
    out: list[str] = []
    first = 0
    wanted = np.asarray(file_rows, dtype=np.int64)
    for group in range(rows.parquet.num_row_groups):
        for rb in rows.parquet.iter_batches(columns=list(columns), row_groups=[group]):
            lo, hi = np.searchsorted(wanted, [first, first + rb.num_rows])
            if hi > lo:
                picked = rb.take(pa.array(wanted[lo:hi] - first))
                cols = [picked.column(c).to_pylist() for c in columns]
                out.extend("\n\n".join(str(v) for v in parts if v) for parts in zip(*cols, strict=True))
            first += rb.num_rows
    return out


def _f(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def mode_description(terms: Terms, members: Sequence[int], labels: dict[int, str]) -> str:
    sentence = terms.sentence()
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


def modes_table(
    members: list[list[int]],
    summary: list[ClassSummary],
    terms: list[Terms],
    examples: list[list[str]],
    beyond: Beyond,
    labels: dict[int, str] | None = None,
    variants: list[list[dict[str, Any]]] | None = None,
) -> pa.Table:
    variants = variants if variants is not None else [[] for _ in members]
    records = [
        {
            "rank": rank,
            "description": mode_description(t, m, labels or {}),
            "terms": t.terms,
            "concept_ids": m,
            "n_rows": s.n_rows,
            "n_scored": s.n_scored,
            "mean_score": _f(s.mean_score),
            "expected_score": _f(s.expected_score),
            "residual": _f(s.residual),
            "residual_low": _f(s.low),
            "residual_high": _f(s.high),
            "adjusted_for": beyond.adjusted_for,
            "example_row_ids": ex,
            "variants": v,
        }
        for rank, (m, s, t, ex, v) in enumerate(zip(members, summary, terms, examples, variants, strict=True), start=1)
    ]
    return pa.Table.from_pylist(records, schema=S.FAILURE_MODES_SCHEMA)


def slices_file(beyond: Beyond) -> pa.Table:
    return slices_table(beyond.frame, beyond.slices)
