"""Large analyses as Ray jobs: the service writes a `cg-ray run` config and submits it through Ray's
JobSubmissionClient to a real local cluster (dashboard on); the job runs the real default reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cg_ray.serve.api import create_api
from cg_ray.serve.db import Store
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import ServiceSettings
from cg_ray.testing.fakes import HashingReader
from tests.serve.conftest import wait_for


@pytest.mark.slow
def test_large_analysis_runs_as_a_ray_job(tmp_path: Path, job_cluster: str) -> None:
    settings = ServiceSettings(
        data_dir=tmp_path / "data",
        small_analysis_rows=5,  # anything larger goes to the cluster
        ray_address=job_cluster,
        reader={"device": "cpu", "dtype": "float32"},
    )
    store = Store(settings.db_url)
    headers = {"X-API-Key": create_key(store, "jobs")[1]}
    topics = ["adding two numbers", "a polite refusal", "the capital of France", "counting letters"]
    rows = "".join(
        json.dumps(
            {"id": i, "prompt": f"Question {i} about {topics[i % 4]}", "response": f"Answer {i}", "score": i % 2}
        )
        + "\n"
        for i in range(12)
    )
    with TestClient(create_api(settings, store, LocalEncoder(HashingReader()), labels=None)) as client:
        up = client.post("/v1/uploads", headers=headers, files={"file": ("b.jsonl", rows, "application/jsonl")}).json()
        a = client.post("/v1/analyses", headers=headers, json={"upload_ids": [up["id"]], "text": "both"}).json()
        assert a["job_id"], a
        a = wait_for(client, headers, a["id"], timeout=400, interval=2)
        assert a["status"] == "succeeded", a.get("error", a)
        summary = client.get(f"/v1/analyses/{a['id']}/summary", headers=headers).json()
        assert summary["n_rows"] == 12 and summary["d_sae"] == 4608  # the real default reader's SAE
        page = client.get(f"/v1/analyses/{a['id']}/concepts", headers=headers, params={"scored_only": True}).json()
        assert page["total"] > 0


def test_job_config_splits_uploads_per_benchmark(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cg_ray.pipeline.config import parse_run_config
    from cg_ray.serve.db import Analysis, Upload
    from cg_ray.serve.jobs import job_config
    from cg_ray.serve.uploads import UPLOAD_SCHEMA

    path = tmp_path / "u.parquet"
    table = pa.Table.from_pylist(
        [
            {"row_id": "1", "benchmark": "a", "prompt": "p1", "response": "r", "reference": None, "score": 1.0},
            {"row_id": "1", "benchmark": "b", "prompt": "p2", "response": "r", "reference": "x", "score": 0.0},
        ],
        schema=UPLOAD_SCHEMA,
    )
    pq.write_table(table, path)
    upload = Upload(id="u", owner="k", name="u", n_rows=2, benchmarks=["a", "b"], fields={}, path=str(path))
    settings = ServiceSettings(data_dir=tmp_path)
    pre = job_config(
        settings,
        Analysis(id="x", owner="k", upload_ids=["u"], mode="precomputed", options={"text": "both"}),
        [upload],
        tmp_path / "w",
    )
    config = parse_run_config(pre.model_dump(mode="json", exclude_unset=True))  # what job.yaml holds
    assert [s.benchmark for s in config.benchmarks] == ["a", "b"] and config.reader.text == "prompt_response"
    assert all(s.scorer == "precomputed" for s in config.benchmarks)
    gen = job_config(
        settings,
        Analysis(id="y", owner="k", upload_ids=["u"], mode="generate", options={"scorer": "numeric", "text": "prompt"}),
        [upload],
        tmp_path / "w2",
    )
    config = parse_run_config(gen.model_dump(mode="json", exclude_unset=True))
    assert all(s.scorer == "numeric" for s in config.benchmarks) and config.generation.backend == "vllm"


class _AgentStartingClient:
    """The job API of a cluster whose job agent registers after `refusals` submissions."""

    def __init__(self, refusals: int, error: str = "No available agent to submit job, please try again later.") -> None:
        self.refusals, self.error, self.sent = refusals, error, []

    def submit_job(self, *, entrypoint: str, submission_id: str) -> str:
        self.sent.append(submission_id)
        if len(self.sent) <= self.refusals:
            raise RuntimeError(f"Request failed with status code 500: {self.error}.")
        return submission_id


def test_a_submission_waits_for_the_job_agent_and_sends_the_same_id(monkeypatch: pytest.MonkeyPatch) -> None:
    from cg_ray.serve import jobs

    monkeypatch.setattr("time.sleep", lambda s: None)
    client = _AgentStartingClient(refusals=2)
    assert jobs.submit_job(client, entrypoint="true", submission_id="cg-ray-a") == "cg-ray-a"
    assert client.sent == ["cg-ray-a"] * 3


def test_a_submission_gives_up_after_its_wait_and_other_refusals_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from cg_ray.serve import jobs

    monkeypatch.setattr("time.sleep", lambda s: None)
    never = _AgentStartingClient(refusals=10**6)
    with pytest.raises(RuntimeError, match="No available agent"):
        jobs.submit_job(never, entrypoint="true", submission_id="b", wait_s=0.0)
    assert len(never.sent) == 1
    refused = _AgentStartingClient(refusals=1, error="Job with submission_id c already exists")
    with pytest.raises(RuntimeError, match="already exists"):
        jobs.submit_job(refused, entrypoint="true", submission_id="c")
    assert len(refused.sent) == 1
