"""`benchmarks/bench_slices.py` on a tiny workload: the CPU line first, agreement checked, the ratio last."""

from __future__ import annotations

from .runner import run_bench


def test_tiny_bench_prints_hardware_first_and_the_speed_ratio_last() -> None:
    stdout = run_bench("bench_slices.py", "--rows", "3000", "--fields", "4", "--naive-rows", "2000")
    lines = stdout.strip().splitlines()
    assert "same slices and counts: True" in stdout
    assert lines[-1].startswith("speed-up (vectorised / naive loop, same 2,000 rows): ")
