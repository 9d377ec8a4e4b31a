"""The service with one succeeded analysis whose run has the scripted probe's two gaps (tests/probe/
scripted_probe.py), for the probe route tests: as a process and as a Ray job."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from cg_ray.serve.api import create_api
from cg_ray.serve.db import Analysis, Store
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import ServiceSettings
from cg_ray.testing.fakes import HashingReader
from tests.probe.scripted_probe import probe_config, write_run


@contextmanager
def service_with_probed_run(
    settings: ServiceSettings, analysis_id: str
) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    """(client, alice's key headers, the analysis' run folder)."""
    store = Store(settings.db_url)
    owner, key = create_key(store, "alice")
    (settings.analyses_dir / analysis_id).mkdir(parents=True)
    run = write_run(settings.analyses_dir / analysis_id / "run")
    with store.session() as s:
        s.add(Analysis(id=analysis_id, owner=owner, upload_ids=[], mode="precomputed", options={},
                       status="succeeded", progress=1.0, run_dir=str(run)))  # fmt: skip
    with TestClient(create_api(settings, store, LocalEncoder(HashingReader(d_sae=64)), labels=None)) as client:
        yield client, {"X-API-Key": key}, run


def body(url: str, **extra: Any) -> dict[str, Any]:
    """The scripted probe's settings, as a client sends them (the reader is the service's); 24 pairs."""
    config = probe_config(url, seed=0, pairs=24)
    config.pop("reader_factory")
    return config | extra


def follow(
    client: TestClient,
    headers: dict[str, str],
    analysis_id: str,
    until: tuple[str, ...] = ("succeeded", "failed"),
    timeout: float = 300,
) -> dict[str, Any]:
    """GET …/probe until its status is one of `until`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state: dict[str, Any] = client.get(f"/v1/analyses/{analysis_id}/probe", headers=headers).json()
        if state["status"] in until:
            return state
        time.sleep(0.5)
    raise AssertionError(f"the probe did not reach {until}: {state}")
