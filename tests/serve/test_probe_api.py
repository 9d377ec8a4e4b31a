"""POST /v1/analyses/{id}/probe and GET …/probe: a real probe (`cg-ray probe` in a process of its own) of a
published run with two gaps, against the scripted writer and model of tests/probe/scripted_probe.py and the
hashing reader; and the request's checks, made once before anything starts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.serve import probes
from cg_ray.serve.db import Analysis, Store
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import ProbeSettings, ServiceSettings
from tests.describe.endpoint_server import serve
from tests.probe.scripted_probe import READER_FACTORY, script
from tests.serve.probe_service import body, follow, service_with_probed_run

REPO = Path(__file__).resolve().parents[2]
ANALYSIS = "ana_probed"
DOWN = "http://127.0.0.1:9/v1"  # allowed, but nothing listens there
AS_PROCESS = ServiceSettings(probe=ProbeSettings(runner="process"))


pytestmark = pytest.mark.slow  # probes run as processes with their own Ray


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str], str, Path]]:
    """The service with a succeeded analysis whose run has the two gaps; its probe may reach the scripted
    server (and DOWN) and name one key variable."""
    root = tmp_path_factory.mktemp("probe-api")
    with pytest.MonkeyPatch.context() as env, serve(script()) as url:
        # The probe's process imports the reader factory the suite names, which may live in tests/.
        env.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        settings = ServiceSettings(
            data_dir=root / "data",
            probe=ProbeSettings(
                endpoints=[url, DOWN], key_envs=["SCRIPTED_KEY"], reader_factory=READER_FACTORY, runner="process"
            ),
        )
        with service_with_probed_run(settings, ANALYSIS) as (client, headers, run):
            yield client, headers, url, run


def test_a_probe_runs_reports_progress_and_its_results(service) -> None:
    client, headers, url, run = service
    started = client.post(f"/v1/analyses/{ANALYSIS}/probe", headers=headers, json=body(url), params={"fresh": True})
    assert started.status_code == 202, started.text
    assert started.json()["status"] in ("pending", "running") and started.json()["settings"]["pairs"] == 24
    again = client.post(f"/v1/analyses/{ANALYSIS}/probe", headers=headers, json=body(url))
    assert again.status_code == 409 and "running" in again.json()["detail"]["error"]
    state = follow(client, headers, ANALYSIS)
    assert state["status"] == "succeeded", (state.get("error"), state.get("message"), state)
    # the probe's own lines, one per gap written, then the verdicts; no server path in them
    assert any(line.startswith("[1/2] mode:1: ") for line in state["progress"]), state["progress"]
    assert any(line.startswith("[2/2] mode:2: ") for line in state["progress"])
    assert not any(str(run) in line for line in state["progress"])
    results = pq.read_table(run / L.PROBE_RESULTS).to_pylist()
    assert [r["gap_id"] for r in state["results"]] == ["mode:1", "mode:2"]
    assert [(r["verdict"], r["n_pairs"], r["difference"]) for r in state["results"]] == [
        (r["verdict"], r["n_pairs"], r["difference"]) for r in results
    ]
    assert state["decision"].startswith("confirmed ⇔ q ≤ fdr") and state["error"] is None
    view = client.get(f"/v1/analyses/{ANALYSIS}/view", headers=headers).json()  # the explorer's document
    assert [g["verdict"] for g in view["probe"]["gaps"]] == [r["verdict"] for r in results]


def test_a_probe_that_fails_says_why(service) -> None:
    client, headers, url, _ = service
    down = body(url, model=body(url)["model"] | {"endpoint": {"url": DOWN, "retry_wait_s": 0.01}})
    started = client.post(f"/v1/analyses/{ANALYSIS}/probe", headers=headers, json=down, params={"fresh": True})
    assert started.status_code == 202, started.text
    state = follow(client, headers, ANALYSIS, timeout=120)
    assert state["status"] == "failed" and state["results"] is None
    assert "error" in state["error"] and "127.0.0.1:9" in state["error"], state


@pytest.mark.parametrize(
    ("change", "field", "said"),
    [
        ({"gaps": ["mode:9"]}, "gaps", "unknown gap 'mode:9': this run has mode:1, mode:2"),
        ({"model": None}, "model", 'name the model that answers the items in the request\'s "model"'),
        ({"pairs": 2}, "pairs", "probe setting pairs: Input should be greater than or equal to 5"),
        ({"reader_factory": "os:system"}, "reader_factory", "not a request's to set"),
        ({"writer": {"endpoint": "http://127.0.0.2:1/v1", "model": "m"}}, "writer.endpoint", "not an endpoint"),
        ({"writer": {"model": "some/hub-model", "backend": "vllm"}}, "writer.endpoint", "not an endpoint"),
        ({"model": {"backend": "vllm", "model": "some/hub-model"}}, "model.endpoint", "not an endpoint"),
    ],
)
def test_a_bad_request_is_refused_before_anything_starts(service, change, field, said) -> None:
    client, headers, url, _ = service
    answer = client.post(f"/v1/analyses/{ANALYSIS}/probe", headers=headers, json=body(url) | change)
    assert answer.status_code == 422, answer.text
    error = answer.json()["detail"]["error"]
    assert answer.json()["detail"]["field"] == field and said in error
    assert "--model" not in error and "analyses" not in error  # no CLI flag, no server folder


def test_a_key_goes_only_by_the_name_of_an_allowed_variable(service) -> None:
    client, headers, url, _ = service
    writer = body(url)["writer"]
    pasted = client.post(
        f"/v1/analyses/{ANALYSIS}/probe", headers=headers, json=body(url, writer=writer | {"api_key": "sk-secret-1"})
    )
    assert pasted.status_code == 422 and pasted.json()["detail"]["field"] == "writer.api_key"
    assert "sk-secret-1" not in pasted.text  # the value is never echoed
    other = client.post(
        f"/v1/analyses/{ANALYSIS}/probe", headers=headers, json=body(url, writer=writer | {"api_key_env": "HOME"})
    )
    assert (
        other.status_code == 422
        and "'HOME' is not a key variable this service allows" in other.json()["detail"]["error"]
    )


def test_probe_routes_answer_only_the_analysis_owner(service) -> None:
    client, _, url, _ = service
    store: Store = client.app.state.service.store  # type: ignore[attr-defined]
    mallory = {"X-API-Key": create_key(store, "mallory")[1]}
    assert client.get(f"/v1/analyses/{ANALYSIS}/probe", headers=mallory).status_code == 404
    assert client.post(f"/v1/analyses/{ANALYSIS}/probe", headers=mallory, json=body(url)).status_code == 404


def test_a_probe_whose_process_is_ended_reads_failed_and_deleting_its_analysis_ends_it(tmp_path: Path) -> None:
    """What DELETE /v1/analyses/{id} does to a running probe (lifecycle.delete_analysis calls probes.stop), on a
    stand-in process; and a process gone without an outcome is a failed probe, said so, not one running forever."""
    job = tmp_path / probes.JOB_DIR
    job.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    (job / probes.STARTED).write_text(json.dumps({"pid": sleeper.pid, "host": socket.gethostname()}))
    (job / probes.LOG).write_text("[1/2] mode:1: 24 pairs by endpoint:scripted-model\n")
    assert probes.status(job) == "running"
    probes.stop(job)
    assert sleeper.wait(timeout=10) == -signal.SIGTERM
    state = probes.report(job, RunDir(tmp_path))
    assert state is not None and state["status"] == "failed"
    assert state["error"].startswith("the probe's process ended without recording an outcome")
    assert state["progress"] == ["[1/2] mode:1: 24 pairs by endpoint:scripted-model"]


def test_a_key_runs_no_more_probes_at_once_than_analyses(service) -> None:
    """Each probe is a process with its own Ray: a key's running probes count against max_concurrent_analyses
    (2 here), stood in for by two sleeping processes recorded as the probes of two other analyses."""
    client, headers, url, _ = service
    api = client.app.state.service  # type: ignore[attr-defined]
    sleepers = []
    with api.store.session() as s:
        mine = s.get(Analysis, ANALYSIS)
        for i in range(2):
            s.add(Analysis(id=f"ana_busy{i}", owner=mine.owner, upload_ids=[], mode="precomputed", options={},
                           status="succeeded", progress=1.0, run_dir=mine.run_dir))  # fmt: skip
    try:
        for i in range(2):
            job = api.settings.analyses_dir / f"ana_busy{i}" / probes.JOB_DIR
            job.mkdir(parents=True)
            sleepers.append(subprocess.Popen(["sleep", "60"], start_new_session=True))
            (job / probes.STARTED).write_text(json.dumps({"pid": sleepers[-1].pid, "host": socket.gethostname()}))
        refused = client.post(f"/v1/analyses/{ANALYSIS}/probe", headers=headers, json=body(url))
        assert refused.status_code == 429, refused.text
        assert "2 probes already running for this key" in refused.json()["detail"]["error"]
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def test_a_probe_whose_process_never_starts_reads_failed_with_why(tmp_path: Path, monkeypatch) -> None:
    from cg_ray.probe.config import ProbeConfig

    monkeypatch.setattr(probes.sys, "executable", str(tmp_path / "no-python"))
    job = tmp_path / probes.JOB_DIR
    probes.start(job, tmp_path, ProbeConfig(), fresh=False, settings=AS_PROCESS)
    state = probes.report(job, RunDir(tmp_path))
    assert state is not None and state["status"] == "failed"
    assert state["error"] == "cg-ray probe: error: its process did not start (No such file or directory)"
    # a start recorded without its process (the service died between the two) is not pending forever
    (job / probes.OUTCOME).unlink()
    assert probes.status(job) == "pending"
    old = time.time() - probes.START_GRACE_S - 1
    os.utime(job / probes.STARTED, (old, old))
    assert probes.status(job) == "failed"


def test_two_starts_at_once_start_one_probe(tmp_path: Path, monkeypatch) -> None:
    """Two POSTs racing for one analysis: the check that none runs and the start are one step under a lock,
    so the second is refused with 409 instead of starting a second process on the same work folder. The
    check is slowed so that, without the lock, both would pass it."""
    from fastapi import HTTPException

    from cg_ray.probe.config import ProbeConfig

    stand_in = tmp_path / "probe-process"
    stand_in.write_text("#!/bin/sh\nsleep 30\n")
    stand_in.chmod(0o755)
    monkeypatch.setattr(probes.sys, "executable", str(stand_in))
    checked = probes.status

    def slow_status(job: Path) -> str | None:
        found = checked(job)
        time.sleep(0.5)
        return found

    monkeypatch.setattr(probes, "status", slow_status)
    job = tmp_path / probes.JOB_DIR
    outcomes: list[int] = []

    def post() -> None:
        try:
            probes.start(job, tmp_path, ProbeConfig(), fresh=False, settings=AS_PROCESS)
            outcomes.append(200)
        except HTTPException as exc:
            outcomes.append(exc.status_code)

    racers = [threading.Thread(target=post) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=30)
    started = json.loads((job / probes.STARTED).read_text())
    try:
        assert sorted(outcomes) == [200, 409], outcomes
    finally:
        os.killpg(int(started["pid"]), signal.SIGKILL)


def test_a_probe_whose_ray_job_cannot_be_submitted_reads_failed_with_why(tmp_path: Path) -> None:
    """The default runner with no dashboard at the service's ray_address: the probe is recorded as failed,
    saying why, with no job id; a POST later starts it afresh."""
    from cg_ray.probe.config import ProbeConfig

    settings = ServiceSettings(data_dir=tmp_path, ray_address="http://127.0.0.1:9", probe=ProbeSettings())
    job = tmp_path / probes.JOB_DIR
    probes.start(job, tmp_path, ProbeConfig(), fresh=False, settings=settings)
    state = probes.report(job, RunDir(tmp_path))
    assert state is not None and state["status"] == "failed"
    assert state["error"].startswith("cg-ray probe: error: its Ray job was not submitted ("), state["error"]
    assert "ray_job" not in json.loads((job / probes.STARTED).read_text())


def test_an_unknown_probe_runner_is_refused_naming_it() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as refused:
        ServiceSettings(probe={"runner": "thread"})
    assert refused.value.errors()[0]["loc"] == ("probe", "runner")
