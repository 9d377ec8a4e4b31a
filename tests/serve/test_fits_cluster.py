"""The SHIPPED serve_config.yaml on small Ray clusters (issue #32): on 2 CPUs and on 1 an upload of 200 rows
is analysed to the end with the real default reader; an analysis whose task finds no CPU says it waits and
fails after its deadline with the reason; /readyz says when the cluster cannot fit one analysis.

The application is built exactly as `serve run serve_config.yaml` builds it (its import_path and args); only
`data_dir` is replaced (a temporary folder), and in the deadline test the deadline (tiny) and the reader (the
hashing fake: what is under test there is the scheduling, not the reading).
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROWS = 200


def shipped_app() -> dict[str, Any]:
    (app,) = yaml.safe_load((ROOT / "serve_config.yaml").read_text())["applications"]
    return dict(app)


def build_shipped(data: Path, **changes: Any) -> Any:
    """The shipped application as Serve builds it from the file, data under `data` and `changes` merged."""
    app = shipped_app()
    module, attr = app["import_path"].split(":")
    args = {**app["args"], "data_dir": str(data)}
    for key, value in changes.items():
        args[key] = {**args[key], **value} if isinstance(value, dict) else value
    return getattr(importlib.import_module(module), attr)(args)


@pytest.fixture
def tmp() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="cgc", dir="/tmp"))  # short: Ray's socket paths have a length limit
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def wait_status(client: httpx.Client, headers: dict[str, str], analysis_id: str, until: Any, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while not until(status := client.get(f"/v1/analyses/{analysis_id}", headers=headers).json()):
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    return dict(status)


def upload_and_analyse(client: httpx.Client, headers: dict[str, str]) -> str:
    from cg_ray.testing.local_serve import jsonl

    up = client.post("/v1/uploads", headers=headers, files={"file": ("b.jsonl", jsonl(ROWS, 3), "application/jsonl")})
    assert up.status_code == 201, up.text
    ana = client.post("/v1/analyses", headers=headers, json={"upload_ids": [up.json()["id"]]})
    assert ana.status_code == 202, ana.text
    return str(ana.json()["id"])


@pytest.mark.slow
@pytest.mark.parametrize("cpus", [2, 1])
def test_the_shipped_config_analyses_200_rows_on_a_small_cluster(monkeypatch, tmp: Path, cpus: int) -> None:
    import ray
    from ray import serve

    from cg_ray.errors import ConfigError
    from cg_ray.testing.local_serve import APP, local_serve, tenant

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with local_serve(tmp, num_cpus=cpus) as port:
        assert ray.cluster_resources()["CPU"] == cpus
        try:
            app = build_shipped(tmp / "data")
        except ConfigError as refused:  # allowed by the issue on 1 CPU: refused at start-up, saying why
            assert cpus == 1 and "leaves no CPU for analyses" in str(refused), refused
            return
        started = time.monotonic()
        serve.run(app, name=APP, route_prefix="/")
        deployed = time.monotonic() - started
        headers = tenant(tmp / "data", "small")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            assert client.get("/readyz").json()["status"] == "ready"
            started = time.monotonic()
            analysis_id = upload_and_analyse(client, headers)
            status = wait_status(client, headers, analysis_id, lambda s: s["status"] in ("succeeded", "failed"), 240)
            took = time.monotonic() - started
            assert status["status"] == "succeeded", status
            summary = client.get(f"/v1/analyses/{analysis_id}/summary", headers=headers).json()
            assert summary["n_rows"] == ROWS
        print(f"\n{cpus} CPU(s): deployed in {deployed:.1f} s, {ROWS}-row upload + analysis in {took:.1f} s")


@pytest.mark.slow
def test_an_analysis_that_finds_no_cpu_says_so_and_fails_after_its_deadline(monkeypatch, tmp: Path) -> None:
    import ray
    from fastapi.testclient import TestClient
    from ray import serve

    from cg_ray.serve.analyses import RayTasks
    from cg_ray.serve.api import create_api
    from cg_ray.serve.db import ACTIVE_STATUSES, Store
    from cg_ray.serve.encoding import LocalEncoder
    from cg_ray.serve.settings import ServiceSettings
    from cg_ray.testing.fakes import HashingReader
    from cg_ray.testing.local_serve import APP, FAKE_READER, local_serve, tenant

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with local_serve(tmp, num_cpus=2) as port:
        app = build_shipped(
            tmp / "data", limits={"analysis_schedule_timeout_s": 8}, encoder={"reader_factory": FAKE_READER}
        )
        serve.run(app, name=APP, route_prefix="/")
        # Something else takes every CPU the replicas left (another job on the cluster, say).
        free = ray.available_resources()["CPU"]
        hog = ray.remote(num_cpus=free)(Hog).remote()
        assert ray.get(hog.ping.remote(), timeout=60)
        headers = tenant(tmp / "data", "starved")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            analysis_id = upload_and_analyse(client, headers)
            waiting = wait_status(client, headers, analysis_id, lambda s: "waiting" in s["message"], 30)
            assert waiting["status"] == "running" and "waiting for a CPU" in waiting["message"], waiting
            started = time.monotonic()
            failed = wait_status(client, headers, analysis_id, lambda s: s["status"] not in ACTIVE_STATUSES, 60)
            assert time.monotonic() - started < 30  # it failed at its deadline, not whenever
            assert failed["status"] == "failed", failed
            error = failed["error"]
            assert "no CPU became free to run the analysis within 8 s" in error, error
            assert "limits.analysis_schedule_timeout_s" in error and "analysis_num_cpus" in error, error
            # Busy, not too small: the cluster fits an analysis beside the replicas, so the service is ready.
            assert client.get("/readyz").status_code == 200
            ray.kill(hog)
            # With the CPU back, the next analysis runs.
            again = upload_and_analyse(client, headers)
            # Until it has ended: a new analysis is "queued" before it is "running" (CI once read it there).
            done = wait_status(client, headers, again, lambda s: s["status"] not in ACTIVE_STATUSES, 120)
            assert done["status"] == "succeeded", done

        # /readyz when the cluster cannot fit one analysis beside the replicas (here: the replicas claim 1.9
        # of its 2 CPUs and one analysis needs 0.2).
        settings = ServiceSettings(data_dir=tmp / "probe")
        api = create_api(settings, Store(settings.db_url), LocalEncoder(HashingReader(d_sae=8)), labels=None)
        with TestClient(api) as probe:
            api.state.service.offload = RayTasks(num_cpus=0.2, service_cpus=1.9)
            answer = probe.get("/readyz")
            assert answer.status_code == 503, answer.text
            assert answer.json()["status"] == "not ready"
            assert "analyses cannot be scheduled" in answer.json()["error"] and "hold 1.9" in answer.json()["error"]
            api.state.service.offload = RayTasks(num_cpus=0.2, service_cpus=1.6)
            assert probe.get("/readyz").status_code == 200


class Hog:
    def ping(self) -> bool:
        return True
