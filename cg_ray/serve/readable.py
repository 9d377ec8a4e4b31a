"""GET /v1/analyses/{id}/themes: what `cg-ray describe` grouped (the explorer reads them in the run's view)."""

from __future__ import annotations

from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.outputs import read_themes
from cg_ray.serve.api_types import ThemesView


def themes(run: RunDir) -> ThemesView | None:
    found = read_themes(run)
    return None if found is None else ThemesView.model_validate(found)
