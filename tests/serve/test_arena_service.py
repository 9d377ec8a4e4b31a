"""The arena mode of the service: battles uploads, validation, and an arena analysis run as a Ray job whose
per-model runs become analyses like any other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cg_ray.serve.api import create_api
from cg_ray.serve.db import Analysis, Store
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import ServiceSettings
from cg_ray.testing.fakes import HashingReader
from tests.serve.conftest import wait_for


def battle(i: int, winner: str = "model_a") -> dict:
    topics = ["fractions", "a haiku about rain", "the French revolution", "sorting a list in Python"]
    return {
        "question_id": f"q{i}",
        "model_a": "alpha",
        "model_b": "beta",
        "winner": winner,
        "conversation_a": [
            {"role": "user", "content": f"Explain {topics[i % 4]}"},
            {"role": "assistant", "content": f"Alpha on {topics[i % 4]}."},
        ],
        "conversation_b": [
            {"role": "user", "content": f"Explain {topics[i % 4]}"},
            {"role": "assistant", "content": f"Beta on {topics[i % 4]}."},
        ],
    }


def jsonl(records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def service(settings: ServiceSettings):
    store = Store(settings.db_url)
    headers = {"X-API-Key": create_key(store, "arena")[1]}
    return TestClient(create_api(settings, store, LocalEncoder(HashingReader()), labels=None)), headers


def test_battles_upload_validation(tmp_path: Path) -> None:
    settings = ServiceSettings(data_dir=tmp_path / "data")
    client, headers = service(settings)
    with client:
        bad = jsonl([battle(0), {**battle(1), "winner": "draw"}])
        r = client.post("/v1/battles", headers=headers, files={"file": ("b.jsonl", bad, "application/jsonl")})
        assert (
            r.status_code == 422
            and r.json()["detail"]["field"] == "winner"
            and "record 1" in r.json()["detail"]["error"]
        )
        r = client.post("/v1/battles", headers=headers, files={"file": ("b.csv", "x", "text/csv")})
        assert r.status_code == 415
        assert client.get("/v1/uploads", headers=headers).json() == []
        assert list(settings.uploads_dir.iterdir()) == []
        ok = client.post(
            "/v1/battles",
            headers=headers,
            files={"file": ("b.jsonl", jsonl([battle(0), battle(1)]), "application/jsonl")},
        )
        assert ok.status_code == 201 and ok.json()["n_rows"] == 2 and ok.json()["benchmarks"] == ["alpha", "beta"]
        rows = client.post(
            "/v1/uploads", headers=headers, files={"file": ("r.jsonl", '{"prompt": "x"}\n', "application/jsonl")}
        )
        # An arena analysis takes one battles upload; battles cannot feed a plain analysis.
        r = client.post("/v1/analyses", headers=headers, json={"upload_ids": [rows.json()["id"]], "mode": "arena"})
        assert r.status_code == 422
        r = client.post("/v1/analyses", headers=headers, json={"upload_ids": [ok.json()["id"]]})
        assert r.status_code == 422


def test_the_arena_route_takes_only_a_finished_arena_analysis(tmp_path: Path) -> None:
    settings = ServiceSettings(data_dir=tmp_path / "data")
    store = Store(settings.db_url)
    owner, key = create_key(store, "arena")
    with store.session() as s:
        s.add(Analysis(id="ana_plain", owner=owner, upload_ids=[], mode="precomputed", options={}, status="succeeded"))
        s.add(Analysis(id="ana_arena", owner=owner, upload_ids=[], mode="arena", options={}, status="running"))
    store.update_analysis("ana_plain", run_dir=str(tmp_path / "run"))  # a plain analysis, finished
    with TestClient(create_api(settings, store, LocalEncoder(HashingReader()), labels=None)) as client:
        plain = client.get("/v1/analyses/ana_plain/arena", headers={"X-API-Key": key})
        running = client.get("/v1/analyses/ana_arena/arena", headers={"X-API-Key": key})
    assert plain.status_code == 404 and "not an arena analysis" in plain.json()["detail"]["error"]
    assert running.status_code == 409 and "running" in running.json()["detail"]["error"]


@pytest.mark.slow
def test_arena_analysis_as_a_ray_job(tmp_path: Path, job_cluster: str) -> None:
    settings = ServiceSettings(data_dir=tmp_path / "data", ray_address=job_cluster, reader={"device": "cpu"})
    client, headers = service(settings)
    with client:
        records = [battle(i, "model_a" if i % 3 else "model_b") for i in range(16)]
        up = client.post(
            "/v1/battles", headers=headers, files={"file": ("b.jsonl", jsonl(records), "application/jsonl")}
        ).json()
        body = {"upload_ids": [up["id"]], "mode": "arena", "min_battles": 5, "metrics": {"min_rows": 1}}
        a = client.post("/v1/analyses", headers=headers, json=body).json()
        a = wait_for(client, headers, a["id"], timeout=500, interval=2)
        assert a["status"] == "succeeded", json.dumps(a)
        arena = client.get(f"/v1/analyses/{a['id']}/arena", headers=headers).json()
        ratings = {m["model"]: m["bt"] for m in arena["ratings"]}
        assert ratings["alpha"] > ratings["beta"]  # alpha won 2 of 3
        children = arena["model_analyses"]
        assert set(children) == {"alpha", "beta"}
        listed = {x["id"] for x in client.get("/v1/analyses", headers=headers).json()}
        assert set(children.values()) <= listed
        summary = client.get(f"/v1/analyses/{children['alpha']}/summary", headers=headers).json()
        assert summary["n_rows"] == 16 and summary["d_sae"] == 4608
