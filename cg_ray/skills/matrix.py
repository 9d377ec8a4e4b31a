"""Score matrices (rows = models, columns = tasks): read, build from run directories or per-row scores,
and check before any factoring (constant tasks dropped, missing cells imputed or refused with the reason)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import numpy as np
import pandas as pd

from cg_ray.artifacts.layout import RunDir
from cg_ray.errors import InputError

log = logging.getLogger(__name__)

LONG_COLUMNS = ("model", "row_id", "score", "task")


def _read_table(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise InputError("no such file", path=str(path))
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            return pd.read_parquet(path)
        if suffix == ".csv":
            return pd.read_csv(path)
        if suffix in (".jsonl", ".json"):
            return pd.read_json(path, lines=suffix == ".jsonl")
    except (ValueError, OSError) as exc:
        raise InputError(f"cannot read: {exc}", path=str(path)) from None
    raise InputError(f"unsupported file type {suffix!r} (expected .csv, .parquet or .jsonl)", path=str(path))


def read_matrix(path: Path) -> pd.DataFrame:
    """A wide matrix file: a `model` column (else the first column) names the rows; the rest are tasks."""
    frame = _read_table(Path(path))
    key = "model" if "model" in frame.columns else frame.columns[0]
    frame = frame.set_index(key)
    frame.index = frame.index.astype(str)
    frame.columns = [str(c) for c in frame.columns]
    if frame.index.duplicated().any():
        dup = frame.index[frame.index.duplicated()][0]
        raise InputError(f"model {dup!r} appears twice", path=str(path), field=str(key))
    for col in frame.columns:
        values = pd.to_numeric(frame[col], errors="coerce")
        bad = values.isna() & frame[col].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(f"not a number: {frame[col].iloc[row]!r}", path=str(path), row=row, field=col)
        frame[col] = values.astype(float)
    return frame


def read_long(path: Path, task_field: str | None = None) -> pd.DataFrame:
    """Per-row scores: columns model, row_id (or id), score, task (or benchmark, or `task_field` inside a
    JSONL `metadata` object as in ../shared/data/model_outputs). Null scores are kept as missing."""
    path = Path(path)
    frame = _read_table(path)
    if "row_id" not in frame.columns and "id" in frame.columns:
        frame = frame.rename(columns={"id": "row_id"})
    if task_field is not None and "metadata" in frame.columns and task_field not in frame.columns:
        frame["task"] = [m.get(task_field) if isinstance(m, dict) else None for m in frame["metadata"]]
    elif task_field is not None and task_field in frame.columns:
        frame["task"] = frame[task_field]
    elif "task" not in frame.columns:
        frame["task"] = frame["benchmark"] if "benchmark" in frame.columns else "all"
    for col in ("model", "row_id", "score"):
        if col not in frame.columns:
            raise InputError("missing column", path=str(path), field=col)
    out = frame[list(LONG_COLUMNS)].copy()
    out["model"] = out["model"].astype(str)
    out["row_id"] = out["row_id"].astype(str)
    out["task"] = out["task"].fillna("unknown").astype(str)
    out["score"] = pd.to_numeric(out["score"], errors="coerce").astype(float)
    if out.duplicated(["model", "row_id"]).any():
        first = out[out.duplicated(["model", "row_id"])].iloc[0]
        raise InputError(
            f"model {first['model']!r} has row {first['row_id']!r} twice (filter to one judge/opponent first)",
            path=str(path),
            field="row_id",
        )
    return out


def matrix_from_long(long: pd.DataFrame) -> pd.DataFrame:
    """Mean score per (model, task); a task with no scored row for a model is a missing cell."""
    return long.pivot_table(index="model", columns="task", values="score", aggfunc="mean", dropna=False)


def matrix_from_runs(runs: list[RunDir]) -> pd.DataFrame:
    """Per-benchmark mean scores of each run directory's model (rows.parquet, else summary.json)."""
    parts: list[pd.DataFrame] = []
    for run in runs:
        rows, summary = run.rows, run.summary
        if rows.exists():
            frame = pd.read_parquet(rows, columns=["model", "benchmark", "score"])
            parts.append(frame.rename(columns={"benchmark": "task"}))
        elif summary.exists():
            meta = json.loads(summary.read_text())
            model = str(meta.get("evaluated_model") or run.path.name)
            parts.append(
                pd.DataFrame(
                    [{"model": model, "task": b["benchmark"], "score": b.get("mean_score")} for b in meta["benchmarks"]]
                )
            )
        else:
            raise InputError("not a run directory (no rows.parquet or summary.json)", path=str(run))
    long = pd.concat(parts, ignore_index=True)
    long["score"] = pd.to_numeric(long["score"], errors="coerce")
    return long.pivot_table(index="model", columns="task", values="score", aggfunc="mean", dropna=False)


class InputNotes(TypedDict):
    """skills.json's `input`: what was dropped or imputed to make the matrix factorable."""

    dropped_constant_tasks: list[str]
    dropped_empty_tasks: list[str]
    imputed_cells: list[dict[str, str]]
    warnings: list[str]


@dataclass
class Prepared:
    """A complete numeric matrix ready for factoring, and what was done to get it."""

    values: pd.DataFrame
    dropped_constant: list[str] = field(default_factory=list)
    dropped_empty: list[str] = field(default_factory=list)
    imputed_cells: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def notes(self) -> InputNotes:
        return {
            "dropped_constant_tasks": self.dropped_constant,
            "dropped_empty_tasks": self.dropped_empty,
            "imputed_cells": [{"model": m, "task": t} for m, t in self.imputed_cells],
            "warnings": self.warnings,
        }


def prepare(matrix: pd.DataFrame, max_missing: float = 0.2, source: str = "matrix") -> Prepared:
    """Refuse what cannot be factored, drop what carries no information, impute a few missing cells."""
    frame = matrix.astype(float)
    empty_models = [str(m) for m in frame.index[frame.notna().sum(axis=1) == 0]]
    if empty_models:
        raise InputError(f"model(s) with no scored cells: {', '.join(empty_models)}", path=source)
    out = Prepared(values=frame)
    out.dropped_empty = [str(t) for t in frame.columns[frame.notna().sum(axis=0) == 0]]
    frame = frame.drop(columns=out.dropped_empty)
    for task, share in frame.isna().mean(axis=0).items():
        if share > max_missing:
            raise InputError(
                f"task {task!r} is missing for {share:.0%} of models (more than --max-missing {max_missing:.0%}); "
                "drop the task or the models that lack it",
                path=source,
                field=str(task),
            )
    for model, share in frame.isna().mean(axis=1).items():
        if share > max_missing:
            raise InputError(
                f"model {model!r} is missing {share:.0%} of tasks (more than --max-missing {max_missing:.0%})",
                path=source,
            )
    std = frame.std(axis=0, ddof=0, skipna=True)
    out.dropped_constant = [str(t) for t in frame.columns[~(std > 1e-12)]]
    frame = frame.drop(columns=out.dropped_constant)
    missing = frame.isna()
    out.imputed_cells = [(str(frame.index[i]), str(frame.columns[j])) for i, j in np.argwhere(missing.to_numpy())]
    frame = frame.fillna(frame.mean(axis=0))
    n_models, n_tasks = frame.shape
    if n_tasks < 3:
        raise InputError(f"need at least 3 non-constant tasks to factor, have {n_tasks}", path=source)
    if n_models < 3:
        raise InputError(f"need at least 3 models to factor, have {n_models}", path=source)
    if n_models < n_tasks:
        out.warnings.append(
            f"{n_models} models < {n_tasks} tasks: the correlation matrix is singular and the factors are "
            "weakly identified; read loadings as descriptive only"
        )
    for note in out.warnings:
        log.warning(note)
    for task in out.dropped_constant:
        log.warning("task %r is constant across models: dropped", task)
    out.values = frame
    return out


@dataclass
class RowScores:
    """Per-row scores as models × rows (NaN = not scored), with each row's task."""

    scores: np.ndarray
    models: list[str]
    row_ids: list[str]
    tasks: np.ndarray


def rows_matrix(long: pd.DataFrame, source: str = "scores") -> RowScores:
    wide = long.pivot_table(index="model", columns="row_id", values="score", aggfunc="mean", dropna=False)
    empty = [str(m) for m in wide.index[wide.notna().sum(axis=1) == 0]]
    if empty:
        raise InputError(f"model(s) with no scored rows: {', '.join(empty)}", path=source, field="score")
    task_of = long.drop_duplicates("row_id").set_index("row_id")["task"]
    return RowScores(
        scores=wide.to_numpy(dtype=float),
        models=[str(m) for m in wide.index],
        row_ids=[str(r) for r in wide.columns],
        tasks=task_of.reindex(wide.columns).astype(str).to_numpy(),
    )
