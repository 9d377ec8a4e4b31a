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
    """A local Ray cluster with its dashboard (Ray's job API lives there); yields the dashboard address."""
    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp = tempfile.mkdtemp(prefix="cgj", dir="/tmp")  # short: Ray's socket paths have a length limit
    ctx = ray.init(num_cpus=4, include_dashboard=True, _temp_dir=temp, log_to_driver=False)
    yield f"http://{ctx.dashboard_url}"
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)
