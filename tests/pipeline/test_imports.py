"""No side effects at import: the front half's modules pull in no heavy framework until used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    "cg_ray.scoring.judge_pass",
    "cg_ray.generation",
    "cg_ray.generation.vllm",
    "cg_ray.generation.hf",
    "cg_ray.generation.fake",
)


def test_importing_loads_no_framework() -> None:
    code = (
        f"import {', '.join(MODULES)}, sys\n"
        "print(','.join(m for m in ('ray', 'torch', 'vllm', 'transformers', 'datasets') if m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == ""
