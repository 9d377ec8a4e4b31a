"""The artifacts `cg-ray describe` / `cg-ray explain` write into a run directory, and their readers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.errors import InputError

DESCRIPTIONS_FILE: Final = S.DESCRIPTIONS_FILE  # the weakness profile reads it too (cg_ray.profile)
THEMES_FILE: Final = S.THEMES_FILE
EXPLANATIONS_FILE: Final = S.EXPLANATIONS_FILE

DESCRIPTIONS_SCHEMA: Final = pa.schema(
    [
        pa.field("concept_id", pa.int32(), nullable=False),
        pa.field("description", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # llm | label | enrichment | ngrams | none
        pa.field("metadata_enrichment", pa.list_(pa.string()), nullable=False),
        pa.field("top_ngrams", pa.list_(pa.string()), nullable=False),  # activating spans in this suite
        pa.field("top_tokens", pa.list_(pa.string()), nullable=False),
        pa.field("detection_score", pa.float64(), nullable=True),
        pa.field("label", pa.string(), nullable=True),
        pa.field("reasons", pa.list_(pa.string()), nullable=False),  # why the concept was described
        pa.field("X_model", pa.float64(), nullable=True),
        pa.field("X_bench", pa.float64(), nullable=True),
        pa.field("n_active_rows", pa.int64(), nullable=False),
        pa.field("mean_score_active", pa.float64(), nullable=True),
        # JSON list: {row_id, benchmark, score, s_tilde, snippet, span_start, span_end} (span offsets in snippet)
        pa.field("examples", pa.string(), nullable=False),
    ]
)

# One row per (concept, candidate description) scored by detection.
EXPLANATIONS_SCHEMA: Final = pa.schema(
    [
        pa.field("concept_id", pa.int32(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("description", pa.string(), nullable=False),
        pa.field("detection_score", pa.float64(), nullable=True),
        pa.field("fuzzing_score", pa.float64(), nullable=True),  # activating span vs other words marked
        pa.field("n_positive", pa.int32(), nullable=False),
        pa.field("n_negative", pa.int32(), nullable=False),
        pa.field("n_fuzz", pa.int32(), nullable=False),  # fuzzing judgements (right + wrong markings)
        pa.field("n_unparsed", pa.int32(), nullable=False),
        pa.field("parse", pa.string(), nullable=False),  # json | text | failed (how the explanation was read)
        pa.field("raw_explanation", pa.string(), nullable=True),  # the model's answer (llm rows)
        pa.field("first_judgement", pa.string(), nullable=True),  # its first detection answer, as written
        pa.field("model", pa.string(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
    ]
)


def read_descriptions(run_dir: Path) -> list[dict[str, Any]] | None:
    run = RunDir(run_dir)
    table = run.read_table(DESCRIPTIONS_FILE)
    if table is None:
        return None
    rows: list[dict[str, Any]] = table.to_pylist()
    for i, r in enumerate(rows):
        try:
            r["examples"] = json.loads(r["examples"])
        except (TypeError, json.JSONDecodeError):
            raise InputError("invalid JSON", path=str(run.file(DESCRIPTIONS_FILE)), row=i, field="examples") from None
    return rows


def read_sentences(run_dir: Path) -> dict[int, str]:
    """concept_id → its description sentence, for the tables that show it before the label ({} if none)."""
    return {int(d["concept_id"]): str(d["description"]) for d in read_descriptions(run_dir) or []}


def read_themes(run_dir: Path) -> dict[str, Any] | None:
    """themes.json through its model (a newer format_version, or one without `themes`, is refused)."""
    return RunDir(run_dir).read_json_if_present(THEMES_FILE)
