"""What the API and the explorer show from `cg-ray describe`: themes and per-concept descriptions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cg_ray.describe.outputs import read_descriptions, read_themes


def themes(run_dir: str | Path) -> dict[str, Any] | None:
    return read_themes(Path(run_dir))


def concept_description(run_dir: str | Path, concept_id: int) -> dict[str, Any] | None:
    """The concept's row of descriptions.parquet (description, source, enrichment, examples…), if described."""
    for row in read_descriptions(Path(run_dir)) or []:
        if row["concept_id"] == concept_id:
            return row
    return None
