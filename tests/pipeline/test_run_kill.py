"""`cg-ray run` whose evaluated model is a slow endpoint (the endpoint backend over HTTP, the scripted server),
killed (SIGKILL, the whole process group: driver and Ray) after about half of its rows were answered, then
rerun with `--resume`: the shards finished before the kill are kept, so the rerun asks again only the rows of
the shards that were not yet finished (at most those in flight at the kill), and publishes the clean run's
rows and findings. The reader is the fake behind the real interface; generation is the real backend."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.describe.endpoint_server import Script, serve, settled
from tests.pipeline.test_endpoint_backend import answer
from tests.pipeline.test_runner import comparable

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FAKE_READER = "cg_ray.testing.fakes:HashingReader.from_config"
DELAY_S = 0.5  # each answer of the evaluated model
PER_KIND, KINDS = 48, ["arithmetic", "ordering"]  # 96 rows
SHARD_ROWS, CONCURRENCY, BATCH = 8, 4, 4
# A kill loses the shards not yet finished. Ray hands each of the CONCURRENCY HTTP actors up to TASKS blocks of
# one batch each, about in input order, so the TASKS x CONCURRENCY x BATCH rows in flight touch at most
# TASKS x CONCURRENCY x BATCH / SHARD_ROWS + 1 = 5 shards; shards answered but still in the stages after
# generation (scoring, reader) are lost too: 2 more at most.
TASKS = 2  # Ray Data's tasks in flight per actor (a pool held to one stalled a refused run: generation/endpoint.py)
LOST_SHARDS = TASKS * CONCURRENCY * BATCH // SHARD_ROWS + 1 + 2

DRIVER = textwrap.dedent(
    """
    import json, sys
    from cg_ray.pipeline.config import parse_run_config
    from cg_ray.pipeline.runner import RunOptions, run
    cfg = parse_run_config(json.loads(sys.argv[1]))
    run(cfg, RunOptions(resume=sys.argv[2] == "resume", shard_rows=int(sys.argv[3]), reader_factory=sys.argv[4]))
    """
)


def _config(out: Path, url: str) -> dict[str, Any]:
    return {
        "name": "k",
        "output_dir": str(out),
        "benchmarks": [{"kind": "probes", "per_kind": PER_KIND, "seed": 0, "kinds": KINDS}],
        "generation": {
            "backend": "endpoint",
            "model": "scripted-model",
            "endpoint": {"url": url, "concurrency": CONCURRENCY, "retry_wait_s": 0.01},
            "sampling": {"max_tokens": 24},
            "resources": {"batch_size": BATCH},
        },
        "reader": {"resources": {"num_cpus": 0.5, "min_actors": 1, "max_actors": 1, "batch_size": SHARD_ROWS}},
        "metrics": {"min_rows": 1},
        "describe": {"enabled": False},
    }


def _run(out: Path, url: str, mode: str) -> subprocess.Popen[bytes]:
    env = os.environ | {"RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT), "TMPDIR": "/tmp"}
    env.pop("RAY_ADDRESS", None)  # a private local Ray, in the run's own process group
    command = [sys.executable, "-c", DRIVER, json.dumps(_config(out, url)), mode, str(SHARD_ROWS), FAKE_READER]
    return subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip


def _finish(proc: subprocess.Popen[bytes]) -> None:
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err.decode()[-3000:]


def _asked(script: Script) -> int:
    """Generation requests the endpoint saw so far."""
    with script.lock:
        return sum(1 for r in script.requests if r.get("body"))


def test_a_killed_run_asks_again_only_the_unfinished_shards(tmp_path: Path) -> None:
    clean = Script(answer)
    with serve(clean) as url:
        _finish(_run(tmp_path / "clean", url, "fresh"))
    rows = _asked(clean)
    assert rows == PER_KIND * len(KINDS) >= 80

    slow = Script(answer, delay_s=DELAY_S)
    partial = tmp_path / "runs" / "k.partial"
    with serve(slow) as url:
        proc, t0 = _run(tmp_path / "runs", url, "fresh"), time.monotonic()
        while _asked(slow) < rows // 2:
            assert proc.poll() is None and time.monotonic() - t0 < 180, "the run ended before half was asked"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Ray: nothing more is sent
        proc.wait()
        killed_s = time.monotonic() - t0
        asked = settled(lambda: _asked(slow))
        shards = len(list(partial.glob("shard-*.parquet")))
        saved = sum(pq.read_metadata(p).num_rows for p in partial.glob("shard-*.parquet"))
        t1 = time.monotonic()
        _finish(_run(tmp_path / "runs", url, "resume"))
        resumed_s = time.monotonic() - t1
        asked_again = _asked(slow) - asked
    print(f"{rows} rows; killed after {killed_s:.1f} s with {asked} asked ({slow.max_in_flight} in flight at most), "
          f"{saved} saved in {shards} shards; the rerun asked {asked_again} in {resumed_s:.1f} s")  # fmt: skip
    assert shards and asked - saved <= LOST_SHARDS * SHARD_ROWS
    assert asked_again == rows - saved  # the rerun asks exactly the rows of the unfinished shards
    assert comparable(tmp_path / "runs" / "k") == comparable(tmp_path / "clean" / "k")  # rows, findings
    assert json.loads((tmp_path / "runs" / "k" / "manifest.json").read_text())["counts"]["shards_resumed"] == shards
    assert not partial.exists()
