"""No side effects at import: no package of cg_ray (nor the front half's modules) pulls in a heavy framework
until it is used."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import cg_ray

PACKAGES = tuple(m.name for m in pkgutil.walk_packages(cg_ray.__path__, "cg_ray.") if m.ispkg)

MODULES = (
    "cg_ray.registry",
    "cg_ray.pipeline.config",
    "cg_ray.benchmarks",
    "cg_ray.benchmarks.local",
    "cg_ray.benchmarks.hf",
    "cg_ray.benchmarks.lm_eval",
    "cg_ray.benchmarks.probes",
    "cg_ray.scoring",
    "cg_ray.scoring.apply",
    "cg_ray.pipeline.judge_pass",
    "cg_ray.generation",
    "cg_ray.generation.vllm",
    "cg_ray.generation.hf",
    "cg_ray.generation.fake",
    "cg_ray.io.records",
    "cg_ray.activations.saes.labels",
    "cg_ray.serve.score_summary",
    "cg_ray.testing.fakes",
)


def test_importing_loads_no_framework() -> None:
    code = (
        f"import {', '.join((*PACKAGES, *MODULES))}, sys\n"
        "print(','.join(m for m in ('ray', 'torch', 'vllm', 'transformers', 'datasets') if m in sys.modules))"
    )
    assert "cg_ray.serve.routes" in PACKAGES and "cg_ray.cli" in PACKAGES
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == ""
