"""What the API and the explorer show from `cg-ray describe`: themes and per-concept descriptions."""

from __future__ import annotations

from pathlib import Path

from cg_ray.describe.outputs import read_descriptions, read_themes
from cg_ray.serve.models import ConceptDescription, ThemesView


def themes(run_dir: str | Path) -> ThemesView | None:
    found = read_themes(Path(run_dir))
    return None if found is None else ThemesView.model_validate(found)


def concept_description(run_dir: str | Path, concept_id: int) -> ConceptDescription | None:
    """The concept's row of descriptions.parquet (description, source, enrichment, examples…), if described."""
    for row in read_descriptions(Path(run_dir)) or []:
        if row["concept_id"] == concept_id:
            return ConceptDescription.model_validate(row)
    return None
