"""Write `cg-ray skills` / `cg-ray estimate` outputs into one directory, atomically. Their report.html comes
drawn already (cg_ray.report.skills, by the CLI: the analysis does not import the report)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from cg_ray import schemas as S
from cg_ray.artifacts.layout import EstimateDir, SkillsDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.skills.analysis import SkillsResult


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v)) + "\n"


def write_skills(result: SkillsResult, out: Path, *, overwrite: bool, page: str) -> Path:
    with atomic_directory(out, overwrite=overwrite) as tmp:
        files = SkillsDir(tmp)
        files.write("loadings.csv", result.loadings.to_csv())
        files.write("profiles.csv", result.profiles.to_csv())
        files.write("redundancy.csv", result.redundancy.to_csv())
        files.write("profile_from_k.csv", result.profile_from_k.to_csv(index=False))
        files.write("skills.json", _json(result.summary))
        files.write(S.REPORT_FILE, page)
    return out


def write_estimate(
    out: Path,
    meta: Mapping[str, object],
    tables: dict[str, pd.DataFrame],
    *,
    overwrite: bool,
    page: str | None = None,
) -> Path:
    with atomic_directory(out, overwrite=overwrite) as tmp:
        files = EstimateDir(tmp)
        for name, table in tables.items():
            files.write(f"{name}.csv", table.to_csv(index=False))  # a table EstimateDir does not name is refused
        files.write("estimate.json", _json(meta))
        if page is not None:
            files.write(S.REPORT_FILE, page)
    return out
