"""Explanations of the failure modes (`failure_modes.parquet`) by the explainer, judged like the concepts'.

A mode's rows are those where any member concept is active. The explainer sees the mode's most activating
rows on which the model failed (score below its metadata cell's mean, the cells the mode was found in) and as
many rows of the same cells, outside the mode, on which it passed, labelled FAILED / PASSED, the failing
ones marked where the mode's strongest member fires; it is asked what the failing ones share. The answer and
the mode's distinctive-terms sentence are then judged like a concept's candidates (`describe/judging.py`):
detection on windows of held-out rows of the mode (around the row's strongest member) and of rows of none of
its concepts, fuzzing on the member's span against other words, both on one half of the rows to choose and
on the other half to report. The LLM sentence replaces the description only when its detection is at least
`LLM_MIN_SCORE` and at least the terms sentence's. By default only the confirmed modes are explained (what
the report shows first); every listed one (up to `MAX_MODES`) with `--all`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.layout import Content
from cg_ray.artifacts.rows import RowsFile, iter_row_batches
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.evidence import read_rows
from cg_ray.describe.fuzzing import SpanReader, held_out_examples
from cg_ray.describe.judging import Scores, Subject, halves
from cg_ray.describe.prompts import mode_prompt
from cg_ray.describe.spans import marked
from cg_ray.describe.windows import char_window, window_chars
from cg_ray.profile.modes import ModeWeights
from cg_ray.profile.strata import RowFrame, cell_keys, expected_scores, read_frame

if TYPE_CHECKING:
    from cg_ray.describe.run import Analysis

MODE_EXPLANATIONS_FILE = S.MODE_EXPLANATIONS_FILE
MAX_MODES = 20


def mode_weights(
    rows: RowsFile, modes: Sequence[Sequence[int]], model: str | None, firing: Mapping[int, float] | None = None
) -> tuple[np.ndarray, RowFrame]:
    """(rows × modes summed member s̃ where they fire, the rows' frame: file rows, scores, metadata): one
    streaming pass. `firing`: each concept's threshold, as failure_modes.parquet records the modes' rule."""
    stats = ModeWeights(modes, rows.d_sae, firing=firing)
    parts = [
        stats.weights(b.offsets, b.concept_ids, b.concept_acts).toarray().astype(np.float32)
        for b in iter_row_batches(rows, model=model)
    ]
    weights = np.concatenate(parts) if parts else np.zeros((0, len(modes)), np.float32)
    return weights, read_frame(rows, model)


def strongest_members(rows: RowsFile, model: str | None, wanted: dict[int, Sequence[int]]) -> dict[int, int]:
    """position → the member concept with the largest activation there, for each wanted position (→ members)."""
    out: dict[int, int] = {}
    at = 0
    for b in iter_row_batches(rows, model=model):
        n = len(b.offsets) - 1
        for p in [p for p in wanted if at <= p < at + n]:
            lo, hi = b.offsets[p - at], b.offsets[p - at + 1]
            ids, acts = np.asarray(b.concept_ids[lo:hi]), np.asarray(b.concept_acts[lo:hi])
            mine = np.isin(ids, list(wanted[p]))
            if mine.any():
                out[p] = int(ids[mine][np.argmax(acts[mine])])
        at += n
    return out


def selected_modes(table: pa.Table, scope_all: bool) -> list[dict[str, Any]]:
    """The confirmed modes (those the report shows first; every listed mode of a run without verdicts), or
    with `scope_all` every listed one; at most MAX_MODES."""
    modes: list[dict[str, Any]] = table.to_pylist()
    if not scope_all and "confirmed" in table.column_names:
        modes = [m for m in modes if m["confirmed"]]
    return modes[:MAX_MODES]


@dataclass
class ModeWork:
    """The modes to explain, their explanation prompts and their judged examples (no request made yet)."""

    table: pa.Table | None
    modes: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    subjects: list[Subject] = field(default_factory=list)  # the terms sentence only, until explained
    reason: str | None = None


def prepare_modes(
    a: Analysis, config: ExplainConfig, read_windows: SpanReader, scope_all: bool, model: str | None = None
) -> ModeWork:
    table = a.run.dir.read_table(S.FAILURE_MODES_FILE)
    if table is None:
        return ModeWork(None, reason="the run has no failure_modes.parquet")
    modes = selected_modes(table, scope_all)
    if not modes:
        return ModeWork(table, reason="no confirmed failure mode (--all explains every listed one)")
    firing = {c: t for m in modes for c, t in zip(m["concept_ids"], m.get("firing_thresholds") or [], strict=False)}
    weights, frame = mode_weights(a.run.rows, [m["concept_ids"] for m in modes], model, firing)
    rng = np.random.default_rng([config.seed, 7])
    picks = [_pick(weights[:, k], frame, m, config, rng) for k, m in enumerate(modes)]
    positions = {int(p) for pick in picks for part in pick for p in part}
    file_rows = {p: int(frame.file_rows[p]) for p in positions}
    a.records.update(read_rows(a.run.rows, set(file_rows.values()) - set(a.records)))
    members: dict[int, set[int]] = {}
    for m, (failed, _passed, pos, _neg) in zip(modes, picks, strict=True):
        for p in (*failed, *pos):
            members.setdefault(int(p), set()).update(m["concept_ids"])
    peak = strongest_members(a.run.rows, model, {p: sorted(c) for p, c in members.items()})
    by_member: dict[int, list[int]] = {}
    for p, c in peak.items():
        by_member.setdefault(c, []).append(file_rows[p])
    windows = read_windows(a, by_member)
    work = ModeWork(table, modes)
    for m, (failed, passed, pos, neg) in zip(modes, picks, strict=True):
        own = {
            file_rows[p]: windows[(peak[p], file_rows[p])]
            for p in (*failed, *pos)
            if (peak.get(p), file_rows[p]) in windows
        }
        chars = window_chars([w[0] for w in own.values()], config.window_tokens)
        mark = np.random.default_rng([config.seed, 8, m["rank"]])
        work.prompts.append(
            mode_prompt(
                [marked(*own[file_rows[p]]) if file_rows[p] in own else a.text_of(file_rows[p]) for p in failed],
                [char_window(a.text_of(file_rows[p]), chars, mark) for p in passed],
            )
        )
        rows_pos, rows_neg = [file_rows[p] for p in pos], [file_rows[p] for p in neg]
        key = (config.seed, 1, int(m["rank"]))
        (sel_p, rep_p), (sel_n, rep_n) = halves(rows_pos, (*key, 1)), halves(rows_neg, (*key, 2))
        work.subjects.append(
            Subject(
                key,
                [m.get("terms_description") or m["description"]],  # as first written: a re-run judges it again
                held_out_examples(a, sel_p, sel_n, own, config, (*key, 3)),
                held_out_examples(a, rep_p, rep_n, own, config, (*key, 4)),
                ["terms"],
            )
        )
    return work


def _pick(
    w: np.ndarray, frame: RowFrame, mode: dict[str, Any], config: ExplainConfig, rng: np.random.Generator
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Positions of (the shown failing rows of the mode, the shown passing rows of the same cells outside it,
    held-out rows of the mode, held-out rows of none of its concepts)."""
    fields = [f for f in (mode.get("adjusted_for") or [S.BENCHMARK]) if f in frame.codes]
    expected = expected_scores(frame, fields)
    cells = cell_keys(frame, fields)
    inside = np.flatnonzero(w > 0)
    inside = inside[np.lexsort((inside, -w[inside]))]  # most activating first
    outside = np.flatnonzero(w == 0)
    with np.errstate(invalid="ignore"):
        failing = inside[frame.scores[inside] < expected[inside]]
        passing = outside[
            (frame.scores[outside] >= expected[outside]) & np.isin(cells[outside], cells[failing[: config.n_examples]])
        ]
    failed = (failing if failing.size else inside)[: config.n_examples]
    passed = np.sort(rng.choice(passing, size=min(config.n_examples, passing.size), replace=False))
    rest = np.setdiff1d(inside, failed)
    others = np.setdiff1d(outside, passed)
    pos = np.sort(rng.choice(rest, size=min(config.detect_rows, rest.size), replace=False))
    neg = np.sort(rng.choice(others, size=min(config.detect_rows, others.size), replace=False))
    return failed.tolist(), passed.tolist(), pos.tolist(), neg.tolist()


def with_choices(
    table: pa.Table, ranks: list[int], sources: list[str], descriptions: list[str], scores: list[float | None]
) -> pa.Table:
    """failure_modes.parquet with the chosen descriptions of the explained modes (by rank), their source and
    held-out detection score; the other modes keep theirs."""
    rows = table.to_pylist()
    chosen = dict(zip(ranks, zip(sources, descriptions, scores, strict=True), strict=True))
    terms_texts = [m.get("terms_description") or m["description"] for m in rows]
    keep = [(m.get("description_source") or "terms", m["description"], m.get("detection_score")) for m in rows]
    new = [chosen.get(m["rank"], old) for m, old in zip(rows, keep, strict=True)]
    table = table.set_column(
        table.schema.get_field_index("description"), "description", pa.array([d for _, d, _ in new], pa.string())
    )
    extra = {
        "terms_description": pa.array(terms_texts, pa.string()),
        "description_source": pa.array([s for s, _, _ in new], pa.string()),
        "detection_score": pa.array([x for _, _, x in new], pa.float64()),
    }
    for name, col in extra.items():
        if name in table.column_names:
            table = table.set_column(table.schema.get_field_index(name), name, col)
        else:
            table = table.append_column(name, col)
    return table


def mode_outputs(
    work: ModeWork, selected: Sequence[list[Scores]], heldout: Sequence[tuple[int, Scores] | None], who: str
) -> tuple[dict[str, Any], dict[str, Content]]:
    """failure_modes.parquet with the chosen descriptions, mode_explanations.parquet, and a summary."""
    if work.table is None or not work.modes:
        return {"modes": 0, "reason": work.reason}, {}
    records, sources, scores, descriptions = [], [], [], []
    for m, sub, sel, held in zip(work.modes, work.subjects, selected, heldout, strict=True):
        for i, (source, text) in enumerate(zip(sub.sources, sub.candidates, strict=True)):
            won = held is not None and held[0] == i
            records.append(
                {
                    "rank": m["rank"],
                    "source": source,
                    "description": text,
                    "detection_score": sel[i].detection,
                    "fuzzing_score": sel[i].fuzzing,
                    "heldout_detection_score": held[1].detection if won and held else None,
                    "heldout_fuzzing_score": held[1].fuzzing if won and held else None,
                    "model": who,
                }
            )
        i = held[0] if held is not None else sub.sources.index("terms")
        sources.append(sub.sources[i])
        descriptions.append(sub.candidates[i])
        scores.append(held[1].detection if held is not None else None)
    files: dict[str, Content] = {
        S.FAILURE_MODES_FILE: with_choices(work.table, [m["rank"] for m in work.modes], sources, descriptions, scores),
        MODE_EXPLANATIONS_FILE: pa.Table.from_pylist(records),
    }
    by_llm = sum(s == "llm" for s in sources)
    return {"modes": len(work.modes), "explained_by_llm": by_llm}, files
