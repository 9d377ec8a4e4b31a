"""The artifacts `cg-ray describe` / `cg-ray explain` write into a run directory, and their readers."""

from __future__ import annotations

import json
from typing import Any, Final

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.errors import InputError

DESCRIPTIONS_FILE: Final = S.DESCRIPTIONS_FILE  # the weakness profile reads it too (cg_ray.profile)
THEMES_FILE: Final = S.THEMES_FILE
EXPLANATIONS_FILE: Final = S.EXPLANATIONS_FILE


def read_descriptions(run: RunDir) -> list[dict[str, Any]] | None:
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


def read_sentences(run: RunDir) -> dict[int, str]:
    """concept_id → its description sentence, for the tables that show it before the label ({} if none)."""
    return {int(d["concept_id"]): str(d["description"]) for d in read_descriptions(run) or []}


def read_themes(run: RunDir) -> dict[str, Any] | None:
    """themes.json through its model (a newer format_version, or one without `themes`, is refused)."""
    return run.read_json_if_present(THEMES_FILE)
