"""`cg-ray explain` against a slow endpoint, killed (SIGKILL, its process group) once about half of its answers
were saved, then rerun with the same command: the rerun asks only what was not saved, so the kill lost at
most the requests in flight (`--concurrency`), and the published explanations, descriptions and themes
(usage figures included, bar the seconds) equal a clean explain's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cg_ray.describe.saved import ANSWERS, WORK_DIR
from tests.cli_process import cli_process, finish
from tests.describe.endpoint_server import Script, serve, settled
from tests.describe.test_endpoint_explain import explainer

pytestmark = pytest.mark.slow

CONCURRENCY = 2
DELAY_S = 0.5  # each answer


def _explain(run: Path, url: str) -> subprocess.Popen[bytes]:
    args = ["explain", str(run), "--concepts", "0,6", "--no-tokens", "--all", "--endpoint", url,
            "--model", "scripted-model", "--concurrency", str(CONCURRENCY)]  # fmt: skip
    return cli_process(args)


def _posts(script: Script) -> int:
    with script.lock:
        return sum(r["path"] == "/v1/chat/completions" for r in script.requests)


def _saved(run: Path) -> int:
    path = run / WORK_DIR / ANSWERS
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _published(run: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    themes = json.loads((run / "themes.json").read_text())
    for key in ("usage", "judge_usage"):
        themes["summary"]["explainer"].get(key, {}).pop("seconds", None)
        themes["summary"]["explainer"].get(key, {}).pop("reused", None)
    tables = [pq.read_table(run / name).to_pylist() for name in ("explanations.parquet", "descriptions.parquet")]
    return tables[0], tables[1], themes


def test_a_killed_explain_asks_again_only_the_requests_in_flight(make_run: Callable[..., Path], tmp_path: Path) -> None:
    built = make_run(labels={0: "',' | '.'", 6: "'books' | 'house'"})
    clean_run, run = (Path(shutil.copytree(built, tmp_path / name)) for name in ("clean", "killed"))
    script = Script(explainer(good=True))  # one server: the endpoint URL is part of what explain publishes
    with serve(script) as url:
        finish(_explain(clean_run, url))
        total = _posts(script)
        assert not (clean_run / WORK_DIR).exists()  # removed once published
        script.delay_s, script.max_in_flight = DELAY_S, 0
        proc, t0 = _explain(run, url), time.monotonic()
        while _saved(run) < total // 2:
            assert proc.poll() is None and time.monotonic() - t0 < 60, "the explain ended before half was saved"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_s = time.monotonic() - t0
        asked, saved = settled(lambda: _posts(script), quiet_s=1.5) - total, _saved(run)
        t1 = time.monotonic()
        finish(_explain(run, url))
        rerun_s, asked_again = time.monotonic() - t1, _posts(script) - total - asked
    print(f"{total} requests; killed after {killed_s:.1f} s with {asked} asked, {saved} saved "
          f"({script.max_in_flight} in flight at most); the rerun asked {asked_again} in {rerun_s:.1f} s")  # fmt: skip
    assert 0 < saved < total and asked - saved <= CONCURRENCY  # lost: at most the requests in flight
    assert asked_again == total - saved  # every saved answer reused, every other request asked
    assert _published(run) == _published(clean_run)  # the same explanations and usage as a clean explain
    usage = json.loads((run / "themes.json").read_text())["summary"]["explainer"]["usage"]
    assert usage["reused"] == saved  # its requests and tokens: as paid, so equal to the clean explain's (above)
    assert not (run / WORK_DIR).exists()
