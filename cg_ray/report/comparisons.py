"""The documents of the analyses beside a run — a diff of two runs, a diff of two models' answers, an arena's
ratings — as the explorer's app draws them. Each is built once here, from the analysis' published files: its
page (cg_ray.report.html) embeds it and the service's route returns it, so both show the same numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.layout import (
    ARENA_RATINGS_JSON,
    MODEL_DIFF_JSON,
    MODEL_DIFF_TABLE,
    ArenaDir,
    DiffDir,
    ModelDiffDir,
)
from cg_ray.artifacts.renamed import ARENA_COLUMNS, renamed_record
from cg_ray.errors import InputError
from cg_ray.report.documents import clean

# The columns of diff_models.parquet the app's concept table sorts, filters and draws (the page holds them all).
MODEL_DIFF_COLUMNS = (
    "concept_id",
    "label",
    "description",
    "n_active_a",
    "n_active_b",
    "n_active_both",
    "frac_a",
    "frac_b",
    "delta",
    "delta_low",
    "delta_high",
    "hypothesis",
    "heldout_delta",
    "heldout_low",
    "heldout_high",
    "q_value",
    "confirmed",
)
MODEL_DIFF_FINDINGS = ("models", "counts", "confirmation", "config", "method", "hypotheses")
# Columns a diff_models.parquet written before its hypotheses were judged over repeated splits (hypotheses.json
# format 1: one half-split, `replicated`) lacks: read as null, so such an analysis still opens.
MODEL_DIFF_JUDGED = {
    "heldout_delta": pa.float64(),
    "heldout_low": pa.float64(),
    "heldout_high": pa.float64(),
    "q_value": pa.float64(),
    "confirmed": pa.bool_(),
}


def with_judged_columns(table: pa.Table) -> pa.Table:
    """diff_models.parquet with the judged columns, null where an older analysis has none."""
    for name, kind in MODEL_DIFF_JUDGED.items():
        if name not in table.column_names:
            table = table.append_column(pa.field(name, kind), pa.nulls(table.num_rows, kind))
    return table


def _side_name(run: dict[str, Any]) -> str:
    return str(run.get("evaluated_model") or Path(str(run["path"])).name)


def diff_document(summary: dict[str, Any]) -> dict[str, Any]:
    """What the app draws for a diff of two runs: diff.json (`cg-ray diff`, or GET /v1/diff computed on the
    fly) as written, with the two sides' names."""
    names = {side: _side_name(summary["runs"][side]) for side in ("a", "b")}
    return clean({**summary, "name": f"{names['a']} → {names['b']}", "names": names})


def diff_view(folder: DiffDir) -> dict[str, Any]:
    """The document of a published diff (its diff.json; a newer format_version is refused, naming the file)."""
    return diff_document(folder.read_json(S.DIFF_JSON))


def model_diff_view(folder: ModelDiffDir) -> dict[str, Any]:
    """hypotheses.json's findings and diff_models.parquet column by column: what the app draws for a diff of
    two models' answers (sorted, filtered and paged in the browser). Paired examples come with the hypotheses;
    the service answers any other concept's on request."""
    doc = folder.read_json(MODEL_DIFF_JSON)
    table = folder.read_table(MODEL_DIFF_TABLE)
    if table is None:
        raise InputError("not found", path=str(folder.file(MODEL_DIFF_TABLE)))
    table = with_judged_columns(table)
    models = doc["models"]
    return clean(
        {
            "name": f"{models['a']} vs {models['b']}",
            **{key: doc.get(key) for key in MODEL_DIFF_FINDINGS},  # confirmation: None in a format-1 analysis
            "concepts": {name: table[name].to_pylist() for name in MODEL_DIFF_COLUMNS},
        }
    )


def arena_view(folder: ArenaDir) -> dict[str, Any]:
    """An arena run's ratings (Bradley–Terry and Elo with their bootstrap intervals, best first), every pair
    that met (observed score share vs the BT prediction), the head-to-head pairs and the concepts each model
    wins and loses on; `model_runs`: each model's run folder under models/ (its own report)."""
    ratings = folder.read_json(ARENA_RATINGS_JSON)  # each refuses a newer format, naming the file
    h2h = folder.read_json(S.HEAD_TO_HEAD_JSON)
    model_runs = (folder.read_json_if_present(S.ARENA_FILE) or {}).get("models", {})
    return clean(
        {
            "name": folder.path.name,
            "config": ratings["config"],
            "n_battles": ratings["n_battles"],
            "n_counted": ratings["n_counted"],
            "ratings": ratings["models"],
            "pairwise": ratings.get("pairwise", []),
            "pairs": h2h.get("pairs", []),
            # an older arena's entries under the new column names (artifacts.renamed)
            "model_concepts": [
                renamed_record(e, ARENA_COLUMNS[S.MODEL_CONCEPTS_FILE]) for e in h2h.get("model_concepts", [])
            ],
            "model_runs": model_runs,
        }
    )
