"""`benchmarks/bench_autoscale.py` end to end (issue #25): on a local autoscaling cluster (Ray's fake
multi-node provider), worker nodes and reader actors scale up under the pipeline and back down when idle,
and encoder replicas scale up under a /v1/score burst and back down after it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .runner import BENCHMARKS

LAST = re.compile(
    r"autoscale: nodes (\d+)->(\d+)->(\d+); actors (\d+)->(\d+)->(\d+); replicas (\d+)->(\d+)->(\d+); "
    r"rows (\d+) in ([0-9.]+) s"
)


@pytest.mark.slow
def test_nodes_actors_and_replicas_scale_up_under_work_and_down_when_idle() -> None:
    # Small: 96 rows, 1 s per reader batch (so the pool has time to grow), a 10 s burst. Its own timeout:
    # node and replica starts take most of the time, and more of it on a busy machine.
    args = ["--rows", "96", "--read-delay", "1.0", "--burst-s", "10", "--clients", "16"]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_autoscale.py"), *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stdout = proc.stdout
    assert stdout.startswith("hardware: CPU"), stdout[:300]
    ours = [line for line in stdout.splitlines() if not line.startswith(("\x1b", "("))]  # not Ray's log lines
    last = ours[-1] if ours else ""
    match = LAST.fullmatch(last)
    assert match, stdout[-3000:]
    a, b, c, d, e, f, g, h, i, rows = (int(x) for x in match.groups()[:10])
    assert b > a and c <= a, last  # worker nodes: up under the pipeline, back to the start when idle
    assert e > d and f <= d, last  # reader actors: the pool grew past its start, and is gone when idle
    assert h > g and i <= g, last  # encoder replicas: up under the burst, back down after it
    assert rows == 96
    assert "reader actors" in stdout and "encoder replicas" in stdout  # the per-second timeline
