"""The null check: the whole judgement rerun with the scores permuted within the cells adjusted for, where
nothing is left to find beyond the metadata, so a confirmed failure mode or concept there is a false one.

`judge_rows` is the findings half of `publish_metrics` without its files (the metrics pass, the slices,
the concepts and the failure modes, each judged held out); `null_check` runs it on permuted scores for a few
seeds. Slices are the metadata's own effects, which a permutation within cells keeps: they are counted apart
(a slice on the adjusted fields stays real under this null; its own null is a permutation over the suite).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from cg_ray.artifacts.rows import RowsFile, accumulate_rows
from cg_ray.config import MetricsConfig
from cg_ray.metrics.compute import compute_metrics
from cg_ray.profile.findings import Beyond, ResidualPass, describe_classes
from cg_ray.profile.strata import RowFrame, cell_keys

NULL_SEEDS = (0, 1, 2)


def judge_rows(
    rows: RowsFile, cfg: MetricsConfig, model: str | None = None, scores: npt.NDArray[np.float64] | None = None
) -> Beyond:
    """Slices, concepts and failure modes of `rows`, judged held out (`scores` replaces the file's)."""
    residuals = ResidualPass(rows, model, cfg, scores=scores)
    acc = accumulate_rows(rows, model=model, observe=residuals.observe)
    beyond = residuals.finish(compute_metrics(acc, cfg))
    describe_classes(rows, model, beyond, cfg, [])
    return beyond


def permuted_within(frame: RowFrame, fields: Sequence[str], seed: int) -> npt.NDArray[np.float64]:
    """The scores shuffled among the scored rows of each cell of `fields` (unscored rows stay unscored)."""
    rng = np.random.default_rng(seed)
    keys = cell_keys(frame, list(fields))
    out = frame.scores.copy()
    scored = np.flatnonzero(frame.scored)
    for cell in np.unique(keys[scored]):
        idx = scored[keys[scored] == cell]
        out[idx] = frame.scores[rng.permutation(idx)]
    return out


def confirmed_counts(beyond: Beyond) -> dict[str, int]:
    confirmed: dict[str, int] = beyond.summary()["crossfit"]["confirmed"]
    return dict(confirmed)


def null_check(
    rows: RowsFile, cfg: MetricsConfig, model: str | None = None, seeds: Sequence[int] = NULL_SEEDS
) -> dict[str, Any]:
    """Confirmed findings per seed with the scores permuted within the cells of the fields the real run adjusts
    for (those fields are kept fixed, so every seed asks the same question)."""
    real = ResidualPass(rows, model, cfg)
    fields = list(real.adjusted_for)
    fixed = cfg.model_copy(update={"adjust_for": ",".join(fields) if fields else "none"})
    runs = []
    for seed in seeds:
        beyond = judge_rows(rows, fixed, model, permuted_within(real.frame, fields, seed))
        runs.append({"seed": int(seed), **confirmed_counts(beyond)})
    return {
        "seeds": [int(s) for s in seeds],
        "permuted_within": fields,
        "confirmed": runs,
        "false_findings": sum(r["failure_modes"] + r["concepts"] for r in runs),
    }
