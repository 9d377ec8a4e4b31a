"""`cg-ray estimate --observed`: a model that is really new, scored so far on some rows of the suite.

The loop a user runs: score the rows of `next_batch.csv`, append them to the observed file (row_id, score),
call again. Each call fits the prior on every model of `--scores`, conditions on the observed rows and
returns the current estimate with its (calibrated) SE and the next batch: the continuation of the design's
order (`--design`) given the rows already observed (which, for rows chosen by earlier calls, is the order
`--holdout` uses, so the loop reproduces `--holdout` exactly)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cg_ray.errors import InputError
from cg_ray.skills.calibrate import SeCalibration
from cg_ray.skills.config import EstimateConfig
from cg_ray.skills.estimate import Estimate, choose_rows, fit_prior, posterior_estimate
from cg_ray.skills.matrix import RowScores


@dataclass
class Observed:
    rows: np.ndarray  # indices into the suite's rows, in file order
    values: np.ndarray


def _records(path: Path) -> tuple[list[dict[str, Any]], str]:
    """The file's records and how its positions are named (`line` for text files, `row` for parquet)."""
    if not path.exists():
        raise InputError("no such file", path=str(path))
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        records = []
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not JSON: {exc.msg}", path=str(path), line=line_no) from None
            if not isinstance(rec, dict):
                raise InputError("expected a JSON object", path=str(path), line=line_no)
            records.append({**rec, "_at": line_no})
        return records, "line"
    if suffix == ".csv":
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False)
        except pd.errors.EmptyDataError:
            return [], "line"
        return _positioned(frame, first=2), "line"  # line 1 is the header
    if suffix == ".parquet":
        return _positioned(pd.read_parquet(path), first=0), "row"
    raise InputError(f"unsupported file type {suffix!r} (expected .csv, .jsonl or .parquet)", path=str(path))


def _positioned(frame: pd.DataFrame, first: int) -> list[dict[str, Any]]:
    return [{**{str(k): v for k, v in rec.items()}, "_at": first + i} for i, rec in enumerate(frame.to_dict("records"))]


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def read_observed(path: Path, row_ids: list[str]) -> Observed:
    """The new model's scores so far: `row_id` (or `id`) and `score` per record. An empty file is the start
    of the loop (nothing scored yet). Refused, naming file, line (row for parquet) and field: a missing
    field, a score that is not a finite number, a row id the suite does not have, a row id given twice."""
    path = Path(path)
    records, unit = _records(path)
    index = {r: k for k, r in enumerate(row_ids)}
    first: dict[str, int] = {}
    rows, values = [], []
    for rec in records:
        at = {unit: rec["_at"]}
        key = "row_id" if "row_id" in rec else "id"
        raw_id = rec.get(key)
        if raw_id is None or str(raw_id).strip() == "":
            raise InputError("row id is missing (row_id or id)", path=str(path), field="row_id", **at)
        row_id = str(raw_id).strip()
        if row_id not in index:
            raise InputError(f"row id {row_id!r} is not a row of the scores", path=str(path), field=key, **at)
        if row_id in first:
            raise InputError(
                f"row id {row_id!r} appears twice (first at {unit} {first[row_id]})", path=str(path), field=key, **at
            )
        first[row_id] = rec["_at"]
        score = _score(rec.get("score"))
        if score is None:
            got = rec.get("score")
            raise InputError(f"score must be a finite number, got {got!r}", path=str(path), field="score", **at)
        rows.append(index[row_id])
        values.append(score)
    return Observed(rows=np.asarray(rows, dtype=int), values=np.asarray(values, dtype=float))


@dataclass
class NextStep:
    estimate: Estimate
    next_rows: np.ndarray  # indices into the suite's rows; empty when the loop is done
    limit: int  # rows the budget allows
    n_rows: int  # rows in the suite
    stop: str | None  # why no further batch: "budget", "target_se", "all_rows"; None while going on


def next_step(
    data: RowScores, observed: Observed, config: EstimateConfig, concepts: np.ndarray | None = None
) -> NextStep:
    """The estimate from the observed rows and the next batch (≤ `config.batch` rows, within the budget
    max(config.budgets) × the suite's rows, none once the overall SE is below `config.target_se`); with
    `concepts` (s̃, concepts × rows) the estimate has each concept's χ_model too."""
    available = ~np.isnan(data.scores).all(axis=0)  # rows some model of the prior was scored on
    unknown = observed.rows[~available[observed.rows]]
    if unknown.size:
        raise InputError(f"row {data.row_ids[int(unknown[0])]!r} has no score for any model of the prior")
    prior = fit_prior(data.scores, config.n_components, config.seed, noise=config.noise)
    estimate = posterior_estimate(prior, available, observed.rows, observed.values, data.tasks, concepts)
    if config.calibrate_models:
        calibration = SeCalibration(data.scores, data.tasks, config, concepts)
        estimate = calibration.apply(estimate, int(observed.rows.size))
    n_rows = int(available.sum())
    limit = max(1, round(max(config.budgets) * n_rows))
    n_next = min(config.batch, limit - observed.rows.size, n_rows - observed.rows.size)
    stop = None
    if observed.rows.size >= n_rows:
        stop = "all_rows"
    elif n_next <= 0:
        stop = "budget"
    elif config.target_se is not None and observed.rows.size and estimate.overall_se < config.target_se:
        stop = "target_se"
    if stop is not None:
        return NextStep(estimate, np.zeros(0, dtype=int), limit, n_rows, stop)
    order = choose_rows(prior, available, n_next, config.design, config.seed, start=observed.rows)
    return NextStep(estimate, order, limit, n_rows, None)
