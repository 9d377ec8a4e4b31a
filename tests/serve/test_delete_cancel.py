"""DELETE /v1/uploads/{id}, DELETE /v1/analyses/{id}, POST /v1/analyses/{id}/cancel, the storage quota."""

from __future__ import annotations

import threading
import time

from fastapi.testclient import TestClient

from cg_ray.serve.db import Store
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import Limits, ServiceSettings
from tests.serve.conftest import wait_for
from tests.serve.test_api import GatedEncoder, _app, upload


def test_delete_upload_and_analysis(client, key, settings) -> None:
    up = upload(client, key).json()["id"]
    analysis_id = client.post("/v1/analyses", headers=key, json={"upload_ids": [up]}).json()["id"]
    assert wait_for(client, key, analysis_id)["status"] == "succeeded"
    assert (settings.analyses_dir / analysis_id).is_dir()
    r = client.delete(f"/v1/analyses/{analysis_id}", headers=key)
    assert r.status_code == 200 and r.json() == {"id": analysis_id, "deleted": True}
    assert not (settings.analyses_dir / analysis_id).exists()
    assert client.get(f"/v1/analyses/{analysis_id}", headers=key).status_code == 404
    assert client.get("/v1/analyses", headers=key).json() == []
    assert client.delete(f"/v1/analyses/{analysis_id}", headers=key).status_code == 404
    assert client.delete(f"/v1/uploads/{up}", headers=key).json() == {"id": up, "deleted": True}
    assert client.get(f"/v1/uploads/{up}", headers=key).status_code == 404
    assert list(settings.uploads_dir.iterdir()) == []


def test_delete_is_tenant_isolated(client, key, other_key, settings) -> None:
    up = upload(client, key).json()["id"]
    analysis_id = client.post("/v1/analyses", headers=key, json={"upload_ids": [up]}).json()["id"]
    assert wait_for(client, key, analysis_id)["status"] == "succeeded"
    for path in (f"/v1/uploads/{up}", f"/v1/analyses/{analysis_id}"):
        r = client.delete(path, headers=other_key)
        assert r.status_code == 404 and r.json()["detail"]["error"].startswith("no ")
    assert client.post(f"/v1/analyses/{analysis_id}/cancel", headers=other_key).status_code == 404
    assert client.get(f"/v1/uploads/{up}", headers=key).status_code == 200
    assert client.get(f"/v1/analyses/{analysis_id}/summary", headers=key).status_code == 200


def _gated(settings: ServiceSettings):
    gate = threading.Event()
    store = Store(settings.db_url)
    headers = {"X-API-Key": create_key(store, "alice")[1]}
    return gate, store, headers


def test_cancel_a_running_analysis_and_it_does_not_rerun_after_restart(settings) -> None:
    gate, store, headers = _gated(settings)
    with TestClient(_app(settings, store, GatedEncoder(gate))) as client:
        up = upload(client, headers).json()["id"]
        analysis_id = client.post("/v1/analyses", headers=headers, json={"upload_ids": [up]}).json()["id"]
        assert client.delete(f"/v1/uploads/{up}", headers=headers).status_code == 409  # in use
        r = client.post(f"/v1/analyses/{analysis_id}/cancel", headers=headers)
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
        assert client.post(f"/v1/analyses/{analysis_id}/cancel", headers=headers).status_code == 409
        # the slot is free again: the concurrency limit counts only queued / running analyses
        gate.set()
        time.sleep(0.2)
        assert client.get(f"/v1/analyses/{analysis_id}", headers=headers).json()["status"] == "cancelled"
        assert not (settings.analyses_dir / analysis_id).exists()
    with TestClient(_app(settings, store, GatedEncoder(gate))) as client:
        time.sleep(0.2)
        assert client.get(f"/v1/analyses/{analysis_id}", headers=headers).json()["status"] == "cancelled"
        assert client.delete(f"/v1/uploads/{up}", headers=headers).status_code == 200


def test_delete_a_running_analysis_cancels_it(settings) -> None:
    gate, store, headers = _gated(settings)
    with TestClient(_app(settings, store, GatedEncoder(gate))) as client:
        up = upload(client, headers).json()["id"]
        analysis_id = client.post("/v1/analyses", headers=headers, json={"upload_ids": [up]}).json()["id"]
        assert client.delete(f"/v1/analyses/{analysis_id}", headers=headers).status_code == 200
        gate.set()
        time.sleep(0.2)
        assert client.get(f"/v1/analyses/{analysis_id}", headers=headers).status_code == 404
        assert not (settings.analyses_dir / analysis_id).exists()
        with store.session() as s:  # the row is kept, marked
            from cg_ray.serve.db import Analysis

            assert s.get(Analysis, analysis_id).status == "deleted"


def test_cancel_stops_a_ray_job(client, key, monkeypatch) -> None:
    from cg_ray.serve import jobs
    from cg_ray.serve.db import Analysis, Upload

    stopped: list[str] = []
    monkeypatch.setattr(jobs, "stop", lambda _settings, job_id: stopped.append(job_id))
    monkeypatch.setattr(jobs, "refresh", lambda *a: None)
    up = upload(client, key).json()["id"]
    store = client.app.state.service.store
    with store.session() as s:
        owner = s.get(Upload, up).owner
        s.add(Analysis(id="ana_job", owner=owner, upload_ids=[up], mode="generate", options={}, job_id="cg-ray-x"))
    r = client.post("/v1/analyses/ana_job/cancel", headers=key)
    assert r.status_code == 200 and r.json()["status"] == "cancelled" and stopped == ["cg-ray-x"]


def test_storage_quota(tmp_path) -> None:
    import io

    import pyarrow.parquet as pq

    from cg_ray.serve.api import create_api
    from cg_ray.serve.encoding import LocalEncoder
    from cg_ray.serve.uploads import parse_file
    from cg_ray.testing.fakes import HashingReader
    from tests.serve.test_api import ROWS, jsonl

    buf = io.BytesIO()
    pq.write_table(parse_file(jsonl(ROWS), "b.jsonl", None, None, "bench", Limits()).table, buf)
    one = len(buf.getvalue())  # room for one stored upload, not two
    settings = ServiceSettings(data_dir=tmp_path / "d", limits=Limits(max_storage_bytes=one * 3 // 2))
    store = Store(settings.db_url)
    headers = {"X-API-Key": create_key(store, "alice")[1]}
    with TestClient(create_api(settings, store, LocalEncoder(HashingReader(d_sae=64)), labels=None)) as client:
        first = upload(client, headers)
        assert first.status_code == 201
        r = upload(client, headers)
        assert r.status_code == 413 and "quota" in r.json()["detail"]["error"]
        assert len(client.get("/v1/uploads", headers=headers).json()) == 1
        assert client.delete(f"/v1/uploads/{first.json()['id']}", headers=headers).status_code == 200
        assert upload(client, headers).status_code == 201
