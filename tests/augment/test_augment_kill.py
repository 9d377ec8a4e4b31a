"""`cg-ray augment` whose writer is a slow endpoint, killed (SIGKILL, its process group) once the first gap's
items were saved, then rerun with the same command: the saved gap is not asked again, the gap being written
at the kill is asked again in full (a gap is the unit saved: at most `overdraw x items` item requests lost),
and the published items and coverage equal a clean augment's."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.augment.config import WORK_DIR
from tests.augment.scripted import READER_FACTORY, build_run, item_requests, writer_script
from tests.cli_process import cli_process, finish
from tests.describe.endpoint_server import Fault, Script, serve, settled

pytestmark = pytest.mark.slow

ITEMS, OVERDRAW = 40, 1.5  # --items; the config's default overdraw: item requests per item wanted, at most
DELAY_S = 0.2  # each item request


def _slow(delay_s: float) -> Script:
    script = writer_script("carry")
    slow: list[Fault] = [("sleep", delay_s)]
    script.fault_for = lambda p: [] if p.startswith("Answer this question") else slow
    return script


def _augment(run: Path, url: str) -> subprocess.Popen[bytes]:
    args = ["augment", str(run), "--benchmark", "narrow", "--writer-endpoint", url, "--writer-model",
            "scripted-model", "--reader-factory", READER_FACTORY, "--items", str(ITEMS)]  # fmt: skip
    return cli_process(args)


def _published(run: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    rd = RunDir(run)
    summary = rd.read_json(L.AUGMENT_SUMMARY)
    items = pq.read_table(rd.file(L.AUGMENT_ITEMS)).to_pylist()
    return items, pq.read_table(rd.file(L.AUGMENT_COVERAGE)).to_pylist(), summary["gaps"]


def test_a_killed_augment_asks_again_only_the_gap_it_was_writing(tmp_path: Path) -> None:
    (tmp_path / "scoped").mkdir()
    scoped = build_run(tmp_path / "scoped")
    clean_run, run = (Path(shutil.copytree(scoped, tmp_path / name)) for name in ("clean", "run"))
    clean = _slow(0.0)
    with serve(clean) as url:
        finish(_augment(clean_run, url))
    per_gap = [g["requests"] for g in _published(clean_run)[2]]
    assert len(per_gap) == 2 and all(n <= math.ceil(OVERDRAW * ITEMS) for n in per_gap)

    slow, saved_dir = _slow(DELAY_S), run / WORK_DIR / "items"
    with serve(slow) as url:
        proc, t0 = _augment(run, url), time.monotonic()
        while not any(saved_dir.glob("*.json")):
            assert proc.poll() is None and time.monotonic() - t0 < 60, "the augment ended before a gap was saved"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        asked = settled(lambda: len(item_requests(slow)))
        saved = [json.loads(p.read_text())["requests"] for p in saved_dir.glob("*.json")]
        finish(_augment(run, url))
        asked_again = len(item_requests(slow)) - asked
    print(f"{sum(per_gap)} item requests in {len(per_gap)} gaps; killed with {asked} asked, {sum(saved)} saved; "
          f"the rerun asked {asked_again}")  # fmt: skip
    assert saved and asked - sum(saved) <= math.ceil(OVERDRAW * ITEMS)  # at most the gap being written
    assert asked_again == sum(per_gap) - sum(saved)  # the saved gap's items are not asked again
    assert _published(run) == _published(clean_run)
    assert not (run / WORK_DIR).exists()
