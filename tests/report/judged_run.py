"""A run directory written by hand in the held-out format of issue #38 (failure modes, slices and a weakness
profile with their verdicts: chosen by some of R repeated grouped splits, tested on the other halves, each
candidate with its minimum detectable effect), for the tests of what presents them: the report, `cg-ray
metrics` and the API. Written against the schema constants, so a column the producers add or drop breaks these
tests too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S

DECISION = "confirmed ⇔ q ≤ fdr: q is the splits' median Benjamini–Hochberg q-value × 2 (Meinshausen et al. 2009)"
INTERVAL = "the effects the same rule does not reject at the fdr level: it excludes 0 exactly when confirmed"
JUDGEMENT = {
    "splits": 10,
    "parts": 20,
    "fdr": 0.1,
    "seed": 0,
    "groups": {"rule": "identical prompts", "n_groups": 1834},
    "decision": DECISION,
    "interval": INTERVAL,
    "candidates": {"failure_modes": 61, "slices": 240, "concepts": 400},
    "confirmed": {"failure_modes": 1, "slices": 1, "slices_beyond_adjusted": 0, "concepts": 1},
    "mde_by_size": [{"n_rows": 50, "mde": 0.297}, {"n_rows": 100, "mde": 0.211}, {"n_rows": 200, "mde": 0.15}],
}
VERDICT = {
    "p_value": 0.4,
    "q_value": 0.62,
    "confirmed": False,
    "splits_selected": 4,
    "n_heldout": 90,
    "n_clusters": 80,
    "mde": 0.172,
}


def mode(rank: int, confirmed: bool, term: str, **changes: Any) -> dict[str, Any]:
    """One failure mode whose rows hold `term`; confirmed ones get a small q-value."""
    verdict = {"p_value": 0.0004, "q_value": 0.003, "confirmed": True, "splits_selected": 9, "n_heldout": 412}
    verdict |= {"mde": 0.09}
    return {
        "rank": rank,
        "description": f"Rows with “{term}”",
        "terms": [term, "board"],
        "term_shares": [0.62, 0.4],
        "background_shares": [0.08, 0.1],
        "concept_ids": [rank, rank + 10],
        "n_rows": 500,
        "n_scored": 480,
        "mean_score": 0.31,
        "expected_score": 0.55,
        "heldout_residual": -0.21 if confirmed else -0.04,
        "heldout_residual_low": -0.3 if confirmed else -0.15,
        "heldout_residual_high": -0.12 if confirmed else 0.07,
        "in_sample_residual": -0.24,
        **(VERDICT | (verdict | {"n_clusters": 380} if confirmed else {})),
        "adjusted_for": ["task"],
        "example_row_ids": [f"r{rank}"],
        **changes,
    }


def slice_(rank: int, confirmed: bool, task: str, **changes: Any) -> dict[str, Any]:
    verdict = {"p_value": 0.0008, "q_value": 0.004, "confirmed": True, "splits_selected": 10, "n_heldout": 300}
    verdict |= {"mde": 0.06}
    return {
        "rank": rank,
        "slice": f"task={task}",
        "conditions": json.dumps({"task": task}),
        "n_rows": 320,
        "mean_score": 0.3 if confirmed else 0.52,
        "low": 0.25 if confirmed else 0.4,
        "high": 0.36 if confirmed else 0.64,
        "mean_in_sample": 0.29,
        "suite_mean": 0.6,
        **(VERDICT | (verdict if confirmed else {})),
        "example_row_ids": [f"r{rank}"],
        **changes,
    }


def weakness(rank: int, concept_id: int, confirmed: bool | None) -> dict[str, Any]:
    """A profile entry; `confirmed` None: the concept was never a candidate (no held-out figures)."""
    heldout = confirmed is not None
    return {
        "rank": rank,
        "concept_id": concept_id,
        "label": f"label {concept_id}",
        "description": f"concept {concept_id}",
        **{c: 0.4 for c in ("X_model", *S.INTERVAL_COLUMNS)},
        "n_rows": 100,
        "n_eff": 50.0,
        "n_benchmarks": 1,
        "group": rank,
        "members": [concept_id],
        "metadata_enrichment": [],
        "example_row_ids": [],
        "adjusted_for": ["task"],
        "terms": ["draw"],
        "heldout_residual": -0.18 if heldout else None,
        "heldout_residual_low": -0.25 if heldout else None,
        "heldout_residual_high": -0.1 if heldout else None,
        **VERDICT,
        "q_value": (0.002 if confirmed else 0.5) if heldout else None,
        "confirmed": bool(confirmed),
    }


def write_run(
    path: Path,
    modes: list[dict[str, Any]],
    slices: list[dict[str, Any]],
    weaknesses: list[dict[str, Any]] | None = None,
    judgement: dict[str, Any] | None = JUDGEMENT,
    key: str = "judgement",  # `crossfit` in runs before format 3
) -> Path:
    """A run directory with rows.parquet (one text row per example id), summary.json and the given tables."""
    path.mkdir(parents=True, exist_ok=True)
    ids = sorted({rid for e in [*modes, *slices] for rid in e["example_row_ids"]})
    schema = S.ROWS_SCHEMA.append(pa.field("prompt", pa.string()))
    rows = [
        {"row_id": rid, "benchmark": "chess", "model": "m", "score": 0.0, "n_tokens": 5}
        | {"concept_ids": [], "concept_acts": [], "prompt": f"{rid}: who wins the draw on this board?"}
        for rid in ids
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path / S.ROWS_FILE)
    pq.write_table(pa.Table.from_pylist(modes, schema=S.FAILURE_MODES_SCHEMA), path / S.FAILURE_MODES_FILE)
    pq.write_table(pa.Table.from_pylist(slices, schema=S.SLICES_SCHEMA), path / S.SLICES_FILE)
    if weaknesses is not None:
        pq.write_table(pa.Table.from_pylist(weaknesses, schema=S.PROFILE_SCHEMA), path / S.WEAKNESSES_FILE)
    beyond: dict[str, Any] = {"adjusted_for": ["task"]} | ({key: judgement} if judgement else {})
    summary = {
        "cg_ray_version": "test",
        "d_sae": 64,
        "n_rows": len(rows),
        "n_scored_rows": len(rows),
        "config": {},
        "labels": None,
        "suite": {},
        "benchmarks": [],
        "rankings": {},
        "profile": {"rank_by": "upper_bound", "duplicate_jaccard": 0.8, "confidence": 0.95, "beyond": beyond},
    }
    (path / S.SUMMARY_FILE).write_text(json.dumps(summary))
    return path
