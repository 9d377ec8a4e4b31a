"""`benchmarks/bench_skills.py` on a tiny workload: the CPU line first, the same rows chosen, the ratio last."""

from __future__ import annotations

from .runner import run_bench


def test_tiny_bench_prints_hardware_first_and_the_speed_ratio_last() -> None:
    stdout = run_bench("bench_skills.py", "--models", "15", "--rows", "60", "--components", "3", "--repeats", "1")
    lines = stdout.strip().splitlines()
    assert "same 15 rows in the same order" in stdout
    assert lines[-1].startswith("speed-up (incremental / naive, same 15 rows): ")
    assert float(lines[-1].rsplit(" ", 1)[1].rstrip("x")) > 0
