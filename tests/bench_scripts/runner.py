"""Run a script of benchmarks/ as a user would, and check the line every benchmark must print first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_bench(script: str, *args: str) -> str:
    """stdout of `python benchmarks/<script> <args>`; fails on a non-zero exit or a missing hardware line."""
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.lstrip().startswith("hardware: CPU"), proc.stdout[:500]
    return proc.stdout
