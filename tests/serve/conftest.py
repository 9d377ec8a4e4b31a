from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cg_ray.serve.api import create_api
from cg_ray.serve.db import Store
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import Limits, ServiceSettings
from cg_ray.testing.fakes import HashingReader
from cg_ray.testing.local_serve import free_port
from tests.conftest import ray_test_cluster


@pytest.fixture
def settings(tmp_path: Path) -> ServiceSettings:
    return ServiceSettings(
        data_dir=tmp_path / "data",
        limits=Limits(max_upload_bytes=200_000, max_line_bytes=5_000, max_rows=500, max_concurrent_analyses=2),
    )


@pytest.fixture
def service(settings: ServiceSettings) -> Iterator[tuple[TestClient, Store]]:
    store = Store(settings.db_url)
    app = create_api(settings, store, LocalEncoder(HashingReader(d_sae=64)), labels=None)
    with TestClient(app) as client:
        yield client, store


@pytest.fixture
def client(service) -> TestClient:
    return service[0]


@pytest.fixture
def key(service) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_key(service[1], 'alice')[1]}"}


@pytest.fixture
def other_key(service) -> dict[str, str]:
    return {"X-API-Key": create_key(service[1], "mallory")[1]}


def wait_for(
    client: TestClient, headers: dict[str, str], analysis_id: str, timeout: float = 30, interval: float = 0.05
) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get(f"/v1/analyses/{analysis_id}", headers=headers).json()
        if status["status"] in ("succeeded", "failed"):
            return status
        time.sleep(interval)
    raise AssertionError(f"analysis {analysis_id} did not finish: {status}")


@pytest.fixture
def job_cluster() -> Iterator[str]:
    """A local Ray cluster with its dashboard (Ray's job API lives there); yields the dashboard address.

    Its dashboard and job agent listen on free ports: with Ray's defaults (8265, 52365) a second Ray instance
    on the machine, such as a test on the other xdist worker, holds the agent's port and every submission
    fails with "No available agent to submit job". ``ray.init`` cannot set the agent's port; a
    ``Cluster`` head node can."""
    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp = tempfile.mkdtemp(prefix="cgj", dir="/tmp")  # short: Ray's socket paths have a length limit
    dashboard_port = free_port()
    head = {"num_cpus": 4, "temp_dir": temp, "include_dashboard": True, "dashboard_port": dashboard_port,
            "dashboard_agent_listen_port": free_port()}  # fmt: skip
    try:
        with ray_test_cluster(**head) as cluster:
            ray.init(address=cluster.address, log_to_driver=False)
            yield f"http://127.0.0.1:{dashboard_port}"
    finally:
        shutil.rmtree(temp, ignore_errors=True)
