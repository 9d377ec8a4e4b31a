"""GET /v1/analyses/{id}/themes: what `cg-ray describe` grouped (the explorer reads them in the run's view)."""

from __future__ import annotations

from pathlib import Path

from cg_ray.describe.outputs import read_themes
from cg_ray.serve.models import ThemesView


def themes(run_dir: str | Path) -> ThemesView | None:
    found = read_themes(Path(run_dir))
    return None if found is None else ThemesView.model_validate(found)
