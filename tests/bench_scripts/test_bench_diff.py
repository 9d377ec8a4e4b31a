"""`benchmarks/bench_diff.py` on a tiny workload: the CPU line first, agreement checked, the ratio last."""

from __future__ import annotations

from .runner import run_bench


def test_tiny_bench_prints_hardware_first_and_the_speed_ratio_last() -> None:
    stdout = run_bench("bench_diff.py", "--rows", "120", "--resamples", "8")
    lines = stdout.strip().splitlines()
    assert "intervals equal to naive" in stdout
    assert lines[-1].startswith("speed-up (vectorised / naive loop, same 8 resamples): ")
