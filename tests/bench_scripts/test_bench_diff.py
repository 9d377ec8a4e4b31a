"""`benchmarks/bench_diff.py` on a tiny workload: the CPU line first, agreement checked, the ratio last."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_diff.py"


def test_tiny_bench_prints_hardware_first_and_the_speed_ratio_last() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--rows", "120", "--resamples", "8"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("hardware: CPU")
    assert "intervals equal to naive" in proc.stdout
    assert lines[-1].startswith("speed-up (vectorised / naive loop, same 8 resamples): ")
