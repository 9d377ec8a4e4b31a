"""A probe over REST as the service runs it by default: a Ray job on the service's cluster (`probe.runner:
ray_job`), submitted to the dashboard, followed and stopped through it, its answering step on that cluster.
The scripted writer and model of tests/probe/scripted_probe.py, the hashing reader."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cg_ray.serve import probes
from cg_ray.serve.jobs import job_client
from cg_ray.serve.settings import ProbeSettings, ServiceSettings
from tests.describe.endpoint_server import serve
from tests.probe.scripted_probe import READER_FACTORY, script
from tests.serve.probe_service import body, follow, service_with_probed_run

REPO = Path(__file__).resolve().parents[2]
ANALYSIS = "ana_probed_by_job"

pytestmark = pytest.mark.slow  # a Ray cluster with its dashboard, and probes as Ray jobs


@pytest.fixture
def repo_importable() -> Iterator[None]:
    """The job imports the reader factory the suite names, which lives in tests/: on the path of the cluster's
    workers, so set before the cluster starts (listed before job_cluster)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), before]))
    yield
    if before is None:
        os.environ.pop("PYTHONPATH")
    else:
        os.environ["PYTHONPATH"] = before


@pytest.fixture
def service(
    repo_importable: None, job_cluster: str, tmp_path: Path
) -> Iterator[tuple[TestClient, dict[str, str], str, ServiceSettings]]:
    root = tmp_path
    with serve(script()) as url:
        settings = ServiceSettings(
            data_dir=root / "data",
            ray_address=job_cluster,
            probe=ProbeSettings(endpoints=[url], reader_factory=READER_FACTORY),  # runner: ray_job, the default
        )
        with service_with_probed_run(settings, ANALYSIS) as (client, headers, _):
            yield client, headers, url, settings


def started(settings: ServiceSettings) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((settings.analyses_dir / ANALYSIS / probes.JOB_DIR / probes.STARTED).read_text())
    return found


def test_a_probe_runs_as_a_ray_job_on_the_service_cluster(service) -> None:
    client, headers, url, settings = service
    answer = client.post(f"/v1/analyses/{ANALYSIS}/probe", headers=headers, json=body(url), params={"fresh": True})
    assert answer.status_code == 202, answer.text
    record = started(settings)
    assert record["pid"] is None and record["ray_job"].startswith(f"cg-ray-probe-{ANALYSIS}-")
    info = job_client(settings.ray_address).get_job_info(record["ray_job"])
    assert "-m cg_ray.serve.probe_job" in info.entrypoint and "--fresh" in info.entrypoint
    state = follow(client, headers, ANALYSIS, timeout=400)
    assert state["status"] == "succeeded", (state.get("error"), state.get("message"), state)
    assert [r["gap_id"] for r in state["results"]] == ["mode:1", "mode:2"]
    assert any(line.startswith("[1/2] mode:1: ") for line in state["progress"]), state["progress"]
    # the outcome is written just before the job's process exits: the job then ends as succeeded
    jobs = job_client(settings.ray_address)
    deadline = time.monotonic() + 60
    while not str(jobs.get_job_status(record["ray_job"])).endswith(("SUCCEEDED", "FAILED")):
        assert time.monotonic() < deadline, "the probe's Ray job did not end after its outcome"
        time.sleep(0.5)
    assert str(jobs.get_job_status(record["ray_job"])).endswith("SUCCEEDED")


def test_a_stopped_probe_job_reads_failed_and_says_so(service) -> None:
    """DELETE of the analysis stops its probe's Ray job (probes.stop); a job ended before the probe could
    record its outcome is a failed probe with the job named, not one running forever."""
    client, headers, url, settings = service
    probe = body(url, pairs=60)
    answer = client.post(f"/v1/analyses/{ANALYSIS}/probe", headers=headers, json=probe, params={"fresh": True})
    assert answer.status_code == 202, answer.text
    follow(client, headers, ANALYSIS, ("running",), timeout=120)
    probes.stop(settings.analyses_dir / ANALYSIS / probes.JOB_DIR)
    state = follow(client, headers, ANALYSIS, timeout=120)
    assert state["status"] == "failed", state
    assert state["error"].startswith(f"its Ray job {started(settings)['ray_job']} ended without recording"), state
