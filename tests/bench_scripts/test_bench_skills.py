"""`benchmarks/bench_skills.py` on a tiny workload: the CPU line first, the same rows chosen, the ratio last."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_skills.py"


def test_tiny_bench_prints_hardware_first_and_the_speed_ratio_last() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--models", "15", "--rows", "60", "--components", "3", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("hardware: CPU")
    assert "same 15 rows in the same order" in proc.stdout
    assert lines[-1].startswith("speed-up (incremental / naive, same 15 rows): ")
    assert float(lines[-1].rsplit(" ", 1)[1].rstrip("x")) > 0
