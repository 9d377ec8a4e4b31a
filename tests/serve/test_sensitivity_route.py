"""POST /v1/analyses/{id}/sensitivity and GET …/sensitivity: `cg-ray sensitivity` of a published run over REST,
with the salted hashing stand-in of tests/sensitivity/test_sensitivity.py as the service's readers (its
`sensitivity.reader_factory`): the planted failure mode replicates under the salted reader and is not found by
the blind one; a reader the service does not allow, or the run's own, is a 422 naming `readers`, nothing
started; one running (its lock held) is a 409 to a second, and one whose replica ended reads failed."""

from __future__ import annotations

import fcntl
import json
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

from cg_ray import schemas as S
from cg_ray.artifacts.layout import SENSITIVITY_FINDINGS, RunDir
from cg_ray.serve import sensitivities
from cg_ray.serve.api import create_api
from cg_ray.serve.db import Analysis, Store
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import SensitivitySettings, ServiceSettings
from cg_ray.testing.fakes import SaltedHashingReader
from tests.sensitivity.test_sensitivity import BLIND, FAKE, SALTED, make_run

pytestmark = pytest.mark.usefixtures("ray_module")

ANALYSIS, HELD, UNRECORDED = "ana_planted", "ana_held", "ana_unrecorded"
ALLOWED = [SALTED, BLIND, "default"]  # "default" is the run's own reader: allowed, yet refused for this run


def url(analysis_id: str = ANALYSIS) -> str:
    return f"/v1/analyses/{analysis_id}/sensitivity"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    """(client, alice's key headers, the run of her succeeded analysis ANALYSIS); HELD has a copy of it."""
    root = tmp_path_factory.mktemp("sensitivity-api")
    settings = ServiceSettings(
        data_dir=root / "data", sensitivity=SensitivitySettings(readers=ALLOWED, reader_factory=FAKE)
    )
    store = Store(settings.db_url)
    owner, key = create_key(store, "alice")
    (settings.analyses_dir / ANALYSIS).mkdir(parents=True)
    run, _ = make_run(settings.analyses_dir / ANALYSIS, "run")
    shutil.copytree(run, settings.analyses_dir / HELD / "run")
    shutil.copytree(run, settings.analyses_dir / UNRECORDED / "run")  # as an analysis run in the service's process
    (settings.analyses_dir / UNRECORDED / "run" / S.MANIFEST_FILE).write_text('{"cg_ray_version": "test"}')
    with store.session() as s:
        for analysis_id in (ANALYSIS, HELD, UNRECORDED):
            s.add(Analysis(id=analysis_id, owner=owner, upload_ids=[], mode="precomputed", options={},
                           status="succeeded", progress=1.0,
                           run_dir=str(settings.analyses_dir / analysis_id / "run")))  # fmt: skip
    encoder = LocalEncoder(SaltedHashingReader())
    with TestClient(create_api(settings, store, encoder, labels=None)) as client:
        yield client, {"X-API-Key": key}, run


def follow(client: TestClient, headers: dict[str, str], timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state: dict[str, Any] = client.get(url(), headers=headers).json()
        if state["status"] in ("succeeded", "failed"):
            return state
        time.sleep(0.5)
    raise AssertionError(f"the sensitivity did not finish: {state}")


def test_post_then_get_gives_each_findings_status_under_each_reader(service) -> None:
    client, headers, run = service
    before = client.get(url(), headers=headers)
    assert before.status_code == 404 and f"POST {url()} starts one" in before.json()["detail"]["error"]
    started = client.post(url(), headers=headers)  # no body: every reader the service allows but the run's own
    assert started.status_code == 202, started.text
    assert started.json()["status"] in ("pending", "running", "succeeded")
    assert started.json()["settings"] == {"readers": [SALTED, BLIND], "fresh": False}
    state = follow(client, headers)
    assert state["status"] == "succeeded" and state["error"] is None, state
    assert any(line.startswith("sensitivity: 3,000 rows") for line in state["progress"]), state["progress"]
    view = state["view"]
    assert [r["name"] for r in view["readers"]] == [SALTED, BLIND] and view["rule"].startswith("found:")
    modes = [f for f in view["findings"] if f["kind"] == "failure_mode"]
    planted = max(modes, key=lambda f: f["n_rows"])
    under = {r["reader"]: r for r in planted["readers"]}
    assert under[SALTED]["status"] == S.FOUND and under[SALTED]["jaccard"] > 0.9 > under[SALTED]["jaccard_by_chance"]
    assert under[BLIND]["status"] == S.NOT_FOUND and under[BLIND]["mark"] == "✗"
    assert under[SALTED]["overlap"].startswith(f"{under[SALTED]['match']}") and "by chance" in under[SALTED]["overlap"]
    assert planted["estimate_text"].startswith("the run's own estimate of its rows: ") and planted["fresh_rows"] is None
    assert planted["other_readers"] == f"{SALTED} ✓, {BLIND} ✗"
    assert {p["reader_b"] for p in view["pairs"]} == {SALTED, BLIND}
    stored = RunDir(run).read_table(SENSITIVITY_FINDINGS).to_pylist()
    assert len(stored) == 2 * (view["total"] + len(view["slices"]))
    text = client.get(url(), headers=headers).text
    assert str(run) not in text and str(run.parent) not in text  # no server path
    assert RunDir(run).steps()[-1]["step"] == "sensitivity"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"readers": ["l13-nowhere"]}, "'l13-nowhere' is not a reader this service re-reads with"),
        ({"readers": ["default"]}, "'default' is the run's own reader"),
        ({"readers": [SALTED, SALTED]}, "a reader is named twice"),
    ],
)
def test_a_reader_refused_is_a_422_naming_it_and_nothing_starts(service, body, said) -> None:
    client, headers, _ = service
    answer = client.post(url(HELD), headers=headers, json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"]["field"] == "readers" and said in answer.json()["detail"]["error"]
    assert client.get(url(HELD), headers=headers).status_code == 404  # nothing started


def test_an_unknown_analysis_is_a_404(service) -> None:
    client, headers, _ = service
    for answer in (client.post(url("ana_nowhere"), headers=headers), client.get(url("ana_nowhere"), headers=headers)):
        assert answer.status_code == 404 and "ana_nowhere" in answer.json()["detail"]["error"]


def test_one_running_refuses_a_second_and_one_whose_replica_ended_reads_failed(service) -> None:
    """A sensitivity runs while its thread holds the lock (here: the test holds it, as a replica would)."""
    client, headers, _ = service
    job = Path(client.app.state.service.settings.analyses_dir) / HELD / sensitivities.JOB_DIR  # type: ignore[attr-defined]
    job.mkdir(parents=True)
    started = {
        "started_at": "2026-01-01T00:00:00+00:00",
        "host": socket.gethostname(),
        "settings": {"readers": [SALTED]},
    }
    (job / sensitivities.STARTED).write_text(json.dumps(started))
    with open(job / sensitivities.RUNNING_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert client.get(url(HELD), headers=headers).json()["status"] == "pending"
        second = client.post(url(HELD), headers=headers, json={"readers": [BLIND]})
        assert second.status_code == 409 and "is running" in second.json()["detail"]["error"]
    state = client.get(url(HELD), headers=headers).json()  # the lock let go with no outcome: its replica ended
    assert state["status"] == "failed" and "POST again to resume it" in state["error"] and state["view"] is None


def test_a_run_over_the_services_rows_is_refused(service) -> None:
    _, _, run = service
    small = SensitivitySettings(readers=ALLOWED, reader_factory=FAKE, max_rows=100)
    with pytest.raises(HTTPException) as refused:
        sensitivities.plan(RunDir(run), (SALTED,), False, small)
    assert refused.value.status_code == 422
    assert "3,000 rows, over the 100 this service re-reads" in refused.value.detail["error"]


def test_a_run_that_records_no_reader_is_a_422_saying_so(service) -> None:
    client, headers, run = service
    answer = client.post(url(UNRECORDED), headers=headers)
    assert answer.status_code == 422, answer.text
    said = answer.json()["detail"]["error"]
    assert said.startswith("this analysis' rows cannot be re-read: its run records no reader") and str(run) not in said
