"""`cg-ray validate`, beyond the metadata: the run's own judgement of the findings, reported as it stands.

The failure modes, slices and concepts are the run's own judgement: read from the run when `validate` writes
into the published run of the same rows and settings (`recorded_block`), else judged exactly as `cg-ray
metrics` judges them (`judgement.judge` on the same rows and `MetricsConfig`: the same row groups, the same
repeated grouped splits, the same decision rule), never rebuilt on validate's fit part. The block lists the
confirmed findings of each kind with their held-out estimate, the interval the decision rule does not reject,
p and q, the splits that chose them and their minimum detectable effect, and the run's `judgement` summary
(splits, groups, the rule, the candidates tried and the confirmed counts).
"""

from __future__ import annotations

import json
from typing import Any

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.renamed import judgement_in
from cg_ray.profile.decision import Verdict
from cg_ray.profile.findings import slices_file, verdict_columns
from cg_ray.profile.judgement import Judgement

JUDGED_BY = (
    "the run's own judgement (cg-ray metrics on the same rows and settings): the same row groups and repeated "
    "grouped splits, confirmed by the same rule"
)
# Columns of failure_modes.parquet kept for each confirmed mode (its rows' ids and term shares stay there).
MODE_COLUMNS = (
    "rank",
    "description",
    "terms",
    "concept_ids",
    "n_rows",
    "n_scored",
    "mean_score",
    "expected_score",
    "heldout_residual",
    "heldout_residual_low",
    "heldout_residual_high",
    "in_sample_residual",
)
_VERDICT = tuple(verdict_columns(Verdict(None, None, None, 1.0, 1.0, False, 0, 0, 0)))  # p, q, splits…
SLICE_COLUMNS = ("rank", "slice", "conditions", "n_rows", "mean_score", "low", "high", "mean_in_sample", "suite_mean")
CONTRAST_COLUMNS = ("contrast", "contrast_low", "contrast_high")


def beyond_block(judgement: Judgement) -> dict[str, Any]:
    """The `beyond` block of validate.json (see the module doc) from a judgement just made of the rows."""
    slices = slices_file(judgement.frame, judgement.slice_findings).to_pylist()
    return _block(judgement.summary(), judgement.modes.to_pylist(), slices)


def recorded_block(run: RunDir) -> dict[str, Any] | None:
    """The same block read from the published run: its summary.json's judgement (every confirmed concept with
    it), failure_modes.parquet and slices.parquet. None when the run was written before they recorded all of
    it (format 3): the rows are then judged again."""
    beyond = ((run.read_summary().get("profile") or {}).get("beyond")) or {}
    modes, slices = run.read_table(S.FAILURE_MODES_FILE), run.read_table(S.SLICES_FILE)
    recorded = "confirmed_concepts" in (judgement_in(beyond) or {})
    if not recorded or modes is None or slices is None or "contrast" not in slices.column_names:
        return None
    return _block(beyond, modes.to_pylist(), slices.to_pylist())


def _block(beyond: dict[str, Any], modes: list[dict[str, Any]], slices: list[dict[str, Any]]) -> dict[str, Any]:
    """The block from a judgement's summary (summary.json's profile.beyond) and its two tables' rows."""
    judged = beyond["judgement"]
    adjusted = set(beyond["adjusted_for"])
    return {
        "judged_by": JUDGED_BY,
        "adjusted_for": beyond["adjusted_for"],
        "notes": beyond["notes"],
        "judgement": judged,
        "failure_modes": [{key: m[key] for key in (*MODE_COLUMNS, *_VERDICT)} for m in modes if m["confirmed"]],
        "slices": [
            {
                **{key: s[key] for key in (*SLICE_COLUMNS, *_VERDICT)},
                "conditions": json.loads(s["conditions"]),  # field → value
                **{key: s[key] for key in CONTRAST_COLUMNS},  # its test-half mean − the half's other rows'
                "beyond_adjusted": not set(json.loads(s["conditions"])) <= adjusted,
            }
            for s in slices
            if s["confirmed"]
        ],
        "concepts": [_concept(c) for c in judged["confirmed_concepts"]],
    }


def _concept(recorded: dict[str, Any]) -> dict[str, Any]:
    """A confirmed concept: its s̃-weighted residual on the test halves, below ("less") or above its cells."""
    return {
        "concept": recorded["concept"],
        "direction": recorded["direction"],
        "heldout_residual": recorded["estimate"],
        "heldout_residual_low": recorded["low"],
        "heldout_residual_high": recorded["high"],
        **{key: recorded[key] for key in _VERDICT},
    }
