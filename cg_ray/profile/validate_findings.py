"""`cg-ray validate`, beyond the metadata: the run's own judgement of the findings, reported as it stands.

The failure modes, slices and concepts are judged exactly as `cg-ray metrics` judges them
(`judgement.judge_rows` on the same rows and `MetricsConfig`: the same row groups, the same repeated grouped
splits, the same decision rule), not rebuilt on validate's fit part. The block lists the confirmed findings
of each kind with their held-out estimate, the interval the decision rule does not reject, p and q, the
splits that chose them and their minimum detectable effect, and the run's `judgement` summary (splits, groups,
the rule, the candidates tried and the confirmed counts).
"""

from __future__ import annotations

import json
from typing import Any

from cg_ray.profile.decision import Verdict, rank_key
from cg_ray.profile.findings import slices_file, verdict_columns
from cg_ray.profile.judgement import Judgement
from cg_ray.profile.verdicts import ConceptKey

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


def beyond_block(beyond: Judgement) -> dict[str, Any]:
    """The `beyond` block of validate.json (see the module doc) from the run's judgement of the rows."""
    summary = beyond.summary()
    adjusted = set(beyond.adjusted_for)
    modes = beyond.modes.to_pylist()
    slices = slices_file(beyond.frame, beyond.slice_findings).to_pylist()
    return {
        "judged_by": JUDGED_BY,
        "adjusted_for": beyond.adjusted_for,
        "notes": beyond.notes,
        "judgement": summary["judgement"],
        "failure_modes": [{key: m[key] for key in (*MODE_COLUMNS, *_VERDICT)} for m in modes if m["confirmed"]],
        "slices": [
            {
                **{key: s[key] for key in (*SLICE_COLUMNS, *_VERDICT)},
                "conditions": json.loads(s["conditions"]),  # field → value
                "contrast": f.verdict.estimate,  # its test-half mean − the half's other rows', and the interval
                "contrast_low": f.verdict.low,
                "contrast_high": f.verdict.high,
                "beyond_adjusted": not {name for name, _ in f.slice.conditions} <= adjusted,
            }
            for s, f in zip(slices, beyond.slice_findings, strict=True)
            if f.verdict.confirmed
        ],
        "concepts": [
            _concept(key, v)
            for key, v in sorted(beyond.concept_verdicts.items(), key=lambda kv: (rank_key(kv[1]), kv[0]))
            if v.confirmed
        ],
    }


def _concept(key: ConceptKey, v: Verdict) -> dict[str, Any]:
    """A confirmed concept: its s̃-weighted residual on the test halves, below ("less") or above its cells."""
    return {
        "concept": key.concept,
        "direction": key.direction,
        "heldout_residual": v.estimate,
        "heldout_residual_low": v.low,
        "heldout_residual_high": v.high,
        **verdict_columns(v),
    }
