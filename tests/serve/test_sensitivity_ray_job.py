"""`cg-ray sensitivity` as a Ray job (`ray job submit -- cg-ray sensitivity RUN --reader NAME`, docs/pipeline.md):
its reader pool joins the job's cluster through RAY_ADDRESS, as the other commands do, instead of starting a
private one. The salted hashing stand-in of tests/sensitivity/test_sensitivity.py reads."""

from __future__ import annotations

import os
import shlex
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.layout import SENSITIVITY_FINDINGS, RunDir
from cg_ray.serve.jobs import job_client, submit_job
from tests.sensitivity.test_sensitivity import BLIND, FAKE, SALTED, make_run

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # a Ray cluster with its dashboard, and the command as a Ray job


@pytest.fixture
def repo_importable() -> Iterator[None]:
    """The job's reader actors import the stand-in from cg_ray.testing and the suite from tests/: set before
    the cluster starts (listed before job_cluster)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), before]))
    yield
    if before is None:
        os.environ.pop("PYTHONPATH")
    else:
        os.environ["PYTHONPATH"] = before


def test_the_command_as_a_ray_job_joins_the_jobs_cluster(
    repo_importable: None, job_cluster: str, tmp_path: Path
) -> None:
    run, _ = make_run(tmp_path, "run")
    argv = [sys.executable, "-m", "cg_ray.cli", "sensitivity", str(run), "--reader", SALTED, "--reader", BLIND,
            "--reader-factory", FAKE]  # fmt: skip
    client = job_client(job_cluster, attempts=3)
    deadline = time.monotonic() + 300
    entrypoint = f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}"
    job = submit_job(client, entrypoint=entrypoint, submission_id=f"cg-ray-sensitivity-{uuid.uuid4().hex[:8]}")
    while (state := str(client.get_job_status(job))) not in ("SUCCEEDED", "FAILED", "STOPPED"):
        assert time.monotonic() < deadline, f"the job is still {state}"
        time.sleep(1)
    logs = str(client.get_job_logs(job))
    assert state == "SUCCEEDED", logs[-3000:]
    assert "Connected to Ray cluster" in logs and "Started a local Ray instance" not in logs  # RAY_ADDRESS's
    found = RunDir(run).read_table(SENSITIVITY_FINDINGS).to_pylist()
    assert {f["reader"] for f in found} == {SALTED, BLIND}
    assert any(f["status"] == S.FOUND for f in found if f["reader"] == SALTED)
