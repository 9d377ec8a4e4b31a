"""Explanations of the failure modes (`failure_modes.parquet`) by the explainer, judged like the concepts'.

A mode's rows are those where any member concept is active. The explainer sees the mode's most activating
rows (one request per mode) and proposes a sentence; the judge answers, per (candidate, held-out row), whether
the row fits the description: `n_detect` held-out rows of the mode (never among the shown ones) and as many
rows of none of its concepts, seeded. The candidates are the LLM sentence and the mode's distinctive-terms
description; the LLM sentence replaces the description only when its detection (balanced accuracy) is at
least `LLM_MIN_SCORE` and at least the terms sentence's. `mode_explanations.parquet` keeps every candidate's
score; `failure_modes.parquet` gets `description_source`, `detection_score` and `terms_description` (the
terms sentence as first written, judged again on a re-run).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.layout import Content, RunDir
from cg_ray.artifacts.rows import iter_row_batches, open_rows
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.descriptions import LLM_MIN_SCORE
from cg_ray.describe.prompts import balanced_accuracy, detect_prompt, explain_prompt, parse_explanation, parse_judgement
from cg_ray.profile.beyond import TEXT_COLUMNS, read_texts
from cg_ray.profile.modes import ClassStats
from cg_ray.profile.strata import read_frame

MODE_EXPLANATIONS_FILE = S.MODE_EXPLANATIONS_FILE
SNIPPET_CHARS = 400
MAX_MODES = 20


def mode_weights(rows_path: Path, modes: Sequence[Sequence[int]], model: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(rows × modes summed member s̃, the file row of each row): one streaming pass over rows.parquet."""
    rows = open_rows(rows_path)
    stats = ClassStats(modes, rows.d_sae, keep_rows=0)
    parts = [
        stats.weights(b.offsets, b.concept_ids, b.concept_acts).toarray().astype(np.float32)
        for b in iter_row_batches(rows, model=model)
    ]
    weights = np.concatenate(parts) if parts else np.zeros((0, len(modes)), np.float32)
    return weights, read_frame(rows, model).file_rows


def pick_rows(
    weights: np.ndarray, file_rows: np.ndarray, config: ExplainConfig
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Per mode (file rows): the shown examples (most activating), held-out rows of the mode and rows of none
    of its concepts, seeded."""
    rng = np.random.default_rng(config.seed)
    shown, pos, neg = [], [], []
    for k in range(weights.shape[1]):
        w = weights[:, k]
        inside = np.flatnonzero(w > 0)
        inside = inside[np.lexsort((inside, -w[inside]))]  # most activating first
        outside = np.flatnonzero(w == 0)
        shown.append(file_rows[inside[: config.n_examples]])
        rest = inside[config.n_examples :]
        pos.append(np.sort(file_rows[rng.choice(rest, size=min(config.detect_rows, rest.size), replace=False)]))
        neg.append(np.sort(file_rows[rng.choice(outside, size=min(config.detect_rows, outside.size), replace=False)]))
    return shown, pos, neg


def with_choices(table: pa.Table, sources: list[str], descriptions: list[str], scores: list[float | None]) -> pa.Table:
    """failure_modes.parquet with the chosen descriptions of its first modes, their source and score."""
    n, n_rest = len(sources), table.num_rows - len(sources)
    terms_texts = [m.get("terms_description") or m["description"] for m in table.to_pylist()]
    kept = table.column("description").to_pylist()[n:]
    table = table.set_column(
        table.schema.get_field_index("description"), "description", pa.array(descriptions + kept, pa.string())
    )
    extra = {
        "terms_description": pa.array(terms_texts, pa.string()),
        "description_source": pa.array(sources + ["terms"] * n_rest, pa.string()),
        "detection_score": pa.array(scores + [None] * n_rest, pa.float64()),
    }
    for name, col in extra.items():
        if name in table.column_names:
            table = table.set_column(table.schema.get_field_index(name), name, col)
        else:
            table = table.append_column(name, col)
    return table


def explain_modes(run_dir: Path, completer: Any, config: ExplainConfig, model: str | None = None) -> dict[str, Any]:
    """Explain and judge the run's top failure modes; rewrite failure_modes.parquet (a post-publish step of
    the run). A summary back."""
    summary, files = mode_files(run_dir, completer, config, model)
    if files:
        RunDir(run_dir).update("explain-modes", files, summary)
    return summary


def mode_files(
    run_dir: Path, completer: Any, config: ExplainConfig, model: str | None = None
) -> tuple[dict[str, Any], dict[str, Content]]:
    """The explained failure modes (failure_modes.parquet, mode_explanations.parquet) and a summary."""
    run = RunDir(run_dir)
    table = run.read_table(S.FAILURE_MODES_FILE)
    if table is None:
        return {"modes": 0, "reason": "the run has no failure_modes.parquet"}, {}
    modes = table.to_pylist()[:MAX_MODES]
    if not modes:
        return {"modes": 0}, {}
    rows_path = run.rows
    weights, file_rows = mode_weights(rows_path, [m["concept_ids"] for m in modes], model)
    shown, pos, neg = pick_rows(weights, file_rows, config)
    needed = np.unique(np.concatenate([*shown, *pos, *neg, np.zeros(0, np.int64)]))
    columns = [c for c in TEXT_COLUMNS if c in pq.read_schema(rows_path).names]
    texts: dict[int, str] = (
        dict(zip(needed.tolist(), read_texts(open_rows(rows_path), needed, columns), strict=True)) if columns else {}
    )

    def snippet(r: int) -> str:
        return texts.get(int(r), "")[:SNIPPET_CHARS]

    answers = completer.complete([explain_prompt([snippet(r) for r in s]) for s in shown], config.explain_tokens)
    candidates: list[list[tuple[str, str]]] = []
    for m, answer in zip(modes, answers, strict=True):
        text, _how = parse_explanation(answer)
        # The terms sentence as first written (a re-run judges the same candidate, not an earlier winner).
        candidates.append(
            ([("llm", text)] if text else []) + [("terms", m.get("terms_description") or m["description"])]
        )
    jobs: list[tuple[int, int, bool]] = []
    prompts: list[str] = []
    for k, cands in enumerate(candidates):
        for i, (_source, description) in enumerate(cands):
            for rows, label in ((pos[k], True), (neg[k], False)):
                for r in rows:
                    jobs.append((k, i, label))
                    prompts.append(detect_prompt(description, snippet(r)))
    judged = completer.complete(prompts, config.detect_tokens)
    votes: dict[tuple[int, int], tuple[list[bool | None], list[bool | None]]] = {}
    for (k, i, label), answer in zip(jobs, judged, strict=True):
        p, n = votes.setdefault((k, i), ([], []))
        (p if label else n).append(parse_judgement(answer))
    records, sources, scores, descriptions = [], [], [], []
    for k, (m, cands) in enumerate(zip(modes, candidates, strict=True)):
        scored = [(src, text, balanced_accuracy(*votes.get((k, i), ([], [])))) for i, (src, text) in enumerate(cands)]
        records += [
            {"rank": m["rank"], "source": src, "description": text, "detection_score": score, "model": config.explainer}
            for src, text, score in scored
        ]
        terms_text = m.get("terms_description") or m["description"]
        best = ("terms", terms_text, dict((s, d) for s, _, d in scored).get("terms"))
        llm = next((x for x in scored if x[0] == "llm"), None)
        if llm and llm[2] is not None and llm[2] >= LLM_MIN_SCORE and llm[2] >= (best[2] or 0.0):
            best = llm
        sources.append(best[0])
        descriptions.append(best[1])
        scores.append(best[2])
    files: dict[str, Content] = {
        S.FAILURE_MODES_FILE: with_choices(table, sources, descriptions, scores),
        MODE_EXPLANATIONS_FILE: pa.Table.from_pylist(records),
    }
    by_llm = sum(s == "llm" for s in sources)
    return {"modes": len(modes), "explained_by_llm": by_llm, "judgements": len(prompts)}, files
