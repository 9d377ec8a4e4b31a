"""`benchmarks/bench_sensitivity.py` on a tiny workload: the CPU line first, agreement checked, the ratio last."""

from __future__ import annotations

import re

from .runner import run_bench


def test_tiny_bench_agrees_with_corrcoef_and_prints_the_ratio_last() -> None:
    stdout = run_bench("bench_sensitivity.py", "--rows", "3000", "--latents", "300", "--density", "0.2")
    lines = stdout.strip().splitlines()
    diff = re.search(r"max \|ours - naive\|: ([0-9.e+-]+)", stdout)
    assert diff is not None and float(diff.group(1)) < 1e-10
    assert lines[-1].startswith("speed-up over the naive way: ")
