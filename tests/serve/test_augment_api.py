"""POST /v1/analyses/{id}/augment and GET …/augment: a real augment (`cg-ray augment` in a process of its own,
on the probe's machinery) of a scoped run with two in-scope gaps of "narrow", against the scripted writer and
the marker reader of tests/augment/scripted.py: it closes both gaps and raises narrow's in-scope coverage.
And the request's checks, made once before anything starts: a bad body, a writer the service does not allow,
a run with no scope, another key's analysis."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.serve import augments, probes
from cg_ray.serve.api import create_api
from cg_ray.serve.db import Analysis, Store
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import ProbeSettings, ServiceSettings
from cg_ray.testing.fakes import HashingReader
from tests.augment.scripted import READER_FACTORY, build_run, item_requests, writer_script
from tests.describe.endpoint_server import serve
from tests.probe.scripted_probe import write_run

REPO = Path(__file__).resolve().parents[2]
ANALYSIS, REFUSED, UNSCOPED = "ana_augmented", "ana_refused", "ana_unscoped"
Service = tuple[TestClient, dict[str, str], str, dict[str, Path]]


@pytest.fixture(scope="module")
def scoped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("augment-run"))


@pytest.fixture(scope="module")
def writer() -> Iterator[tuple[str, Any]]:
    script = writer_script("carry")
    with serve(script) as url:
        yield url, script


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, scoped: Path, writer: tuple[str, Any]) -> Iterator[Service]:
    """Alice's succeeded analyses: two copies of the scoped run (one augmented, one only refused) and a run
    with no scope; augments may reach the scripted writer and name one key variable (the `probe:` lists)."""
    root = tmp_path_factory.mktemp("augment-api")
    url, _ = writer
    settings = ServiceSettings(
        data_dir=root / "data",
        probe=ProbeSettings(
            endpoints=[url], key_envs=["SCRIPTED_KEY"], reader_factory=READER_FACTORY, runner="process"
        ),
    )
    store = Store(settings.db_url)
    owner, key = create_key(store, "alice")
    runs = {a: settings.analyses_dir / a / "run" for a in (ANALYSIS, REFUSED, UNSCOPED)}
    for a in (ANALYSIS, REFUSED):
        shutil.copytree(scoped, runs[a])
    runs[UNSCOPED].parent.mkdir(parents=True)
    write_run(runs[UNSCOPED])
    with store.session() as s:
        for a, run in runs.items():
            s.add(Analysis(id=a, owner=owner, upload_ids=[], mode="precomputed", options={},
                           status="succeeded", progress=1.0, run_dir=str(run)))  # fmt: skip
    with pytest.MonkeyPatch.context() as env:
        # The augment's process imports the reader factory the suite names, which lives in tests/.
        env.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        with TestClient(create_api(settings, store, LocalEncoder(HashingReader(d_sae=64)), labels=None)) as client:
            yield client, {"X-API-Key": key}, url, runs


def body(url: str, **extra: Any) -> dict[str, Any]:
    return {"benchmark": "narrow", "items": 40, "writer": {"endpoint": url, "model": "scripted-model"}} | extra


@pytest.mark.slow  # the augment runs as a process of its own
def test_an_augment_closes_the_gaps_and_raises_coverage(service: Service, writer: tuple[str, Any]) -> None:
    client, headers, url, runs = service
    path = f"/v1/analyses/{ANALYSIS}/augment"
    assert "POST /v1/analyses/ana_augmented/augment starts one" in client.get(path, headers=headers).text
    started = client.post(path, headers=headers, json=body(url, fresh=True))
    assert started.status_code == 202, started.text
    assert started.json()["status"] in ("pending", "running") and started.json()["settings"]["items"] == 40
    again = client.post(path, headers=headers, json=body(url))
    assert again.status_code == 409 and "an augment of this analysis is running" in again.json()["detail"]["error"]
    got = client.get(path, headers=headers)
    state = _follow(client, headers, path)
    assert state["status"] == "succeeded" and state["error"] is None, state
    assert any(line.startswith("[1/2] concept:7: ") for line in state["progress"]), state["progress"]
    assert not any(str(runs[ANALYSIS]) in line for line in state["progress"]) and got.status_code == 200
    summary = state["summary"]
    assert [(g["gap_id"], g["state_before"], g["state_after"]) for g in summary["gaps"]] == [
        ("concept:7", "missing", "covered"), ("concept:8", "missing", "covered"),
    ]  # fmt: skip
    for g in summary["gaps"]:
        assert (
            g["kept"] >= 35
            and g["written"] == g["kept"] + g["format"] + g["wrong_reference"] + g["near_copy"] + g["reader"]
        )
        assert g["bench_rows"] == [0, g["kept"]]
    before, after = summary["coverage"]["in_scope_coverage"]
    assert after == pytest.approx(1.0) and before < after and summary["coverage"]["gaps"] == [2, 0]
    assert summary == {k: v for k, v in RunDir(runs[ANALYSIS]).read_json(L.AUGMENT_SUMMARY).items() if k != "run"}
    assert summary["requests"]["writer"] == len(item_requests(writer[1]))
    assert "run" not in summary and str(runs[ANALYSIS]) not in json.dumps(state)
    assert not (runs[ANALYSIS].parent / augments.JOB_DIR / probes.CONFIG).exists()  # its own files, augment.json
    assert (runs[ANALYSIS].parent / augments.JOB_DIR / "augment.json").is_file()


def _follow(client: TestClient, headers: dict[str, str], path: str) -> dict[str, Any]:
    """GET …/augment until it ends."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        state: dict[str, Any] = client.get(path, headers=headers).json()
        if state["status"] in ("succeeded", "failed"):
            return state
        time.sleep(0.5)
    raise AssertionError(f"the augment did not end: {state}")


@pytest.mark.parametrize(
    ("change", "field", "said"),
    [
        ({"gaps": ["concept:20"]}, "gaps", "concept:20 is not an in-scope gap of narrow: "),
        ({"gaps": ["7"]}, "gaps", "gaps '7': expected concept:ID"),
        ({"benchmark": "nope"}, "benchmark", "no benchmark 'nope' in the run's scope (no such benchmark)"),
        ({"reference": "wide"}, "reference", "reference 'wide': scope compared narrow with ['ref:traffic']"),
        ({"items": 0}, "items", "augment setting items: Input should be greater than or equal to 1"),
        ({"benchmark": ""}, "benchmark", "augment setting benchmark: String should have at least 1 character"),
        ({"colour": "red"}, "colour", "augment setting colour: Extra inputs are not permitted"),
        ({"fresh": "yes"}, "fresh", "augment setting fresh: Input should be a valid boolean"),
        ({"reader_factory": "os:system"}, "reader_factory", "not a request's to set"),
        ({"writer": None}, "writer", "name the model that writes items"),
        ({"writer": {"model": "some/hub-model", "backend": "vllm"}}, "writer.endpoint", "not an endpoint"),
    ],
)
def test_a_bad_body_is_refused_and_nothing_is_written(service: Service, change, field, said) -> None:
    client, headers, url, runs = service
    answer = client.post(f"/v1/analyses/{REFUSED}/augment", headers=headers, json=body(url) | change)
    assert answer.status_code == 422, answer.text
    error = answer.json()["detail"]["error"]
    assert answer.json()["detail"]["field"] == field and said in error, error
    assert "--" not in error and "analyses" not in error  # no CLI flag, no server folder
    assert not (runs[REFUSED] / "augment").exists() and not (runs[REFUSED] / "augment.work").exists()
    assert not (runs[REFUSED].parent / augments.JOB_DIR).exists()


def test_a_writer_the_service_does_not_allow_gets_no_request(service: Service) -> None:
    client, headers, url, runs = service
    elsewhere = writer_script("carry")
    with serve(elsewhere) as other:
        refused = client.post(f"/v1/analyses/{REFUSED}/augment", headers=headers, json=body(other))
        keyed = client.post(
            f"/v1/analyses/{REFUSED}/augment",
            headers=headers,
            json=body(url, writer={"endpoint": url, "model": "m", "api_key_env": "HOME"}),
        )
    assert refused.status_code == 422 and refused.json()["detail"]["field"] == "writer.endpoint"
    assert f"not an endpoint this service allows ({url})" in refused.json()["detail"]["error"]
    assert elsewhere.requests == []
    assert keyed.status_code == 422 and "'HOME' is not a key variable this service allows" in keyed.text
    assert not (runs[REFUSED].parent / augments.JOB_DIR).exists()


def test_a_run_with_no_scope_says_to_make_one(service: Service) -> None:
    client, headers, url, runs = service
    answer = client.post(f"/v1/analyses/{UNSCOPED}/augment", headers=headers, json=body(url))
    assert answer.status_code == 409, answer.text
    assert answer.json()["detail"]["error"] == (
        f"analysis {UNSCOPED!r} has no scope: POST /v1/analyses/{UNSCOPED}/scope first (augment writes items "
        "for the in-scope gaps it finds)"
    )
    assert not (runs[UNSCOPED].parent / augments.JOB_DIR).exists()


def test_augment_routes_answer_only_the_analysis_owner(service: Service) -> None:
    client, _, url, _ = service
    store: Store = client.app.state.service.store  # type: ignore[attr-defined]
    mallory = {"X-API-Key": create_key(store, "mallory")[1]}
    assert client.get(f"/v1/analyses/{ANALYSIS}/augment", headers=mallory).status_code == 404
    assert client.post(f"/v1/analyses/{ANALYSIS}/augment", headers=mallory, json=body(url)).status_code == 404


def test_probes_and_augments_running_count_against_the_key_together(service: Service) -> None:
    """A probe and an augment of two other analyses, stood in for by sleeping processes, fill the key's two
    (max_concurrent_analyses) places: a third job of either kind is a 429 naming both."""
    client, headers, url, _ = service
    api = client.app.state.service  # type: ignore[attr-defined]
    sleepers = []
    with api.store.session() as s:
        owner = s.get(Analysis, REFUSED).owner
        for i in range(2):
            s.add(Analysis(id=f"ana_busy{i}", owner=owner, upload_ids=[], mode="precomputed", options={},
                           status="succeeded", progress=1.0, run_dir=None))  # fmt: skip
    try:
        for i, (folder, command) in enumerate(((probes.JOB_DIR, "probe"), (augments.JOB_DIR, "augment"))):
            job = api.settings.analyses_dir / f"ana_busy{i}" / folder
            job.mkdir(parents=True)
            sleepers.append(subprocess.Popen(["sleep", "60"], start_new_session=True))
            started = {"pid": sleepers[-1].pid, "host": socket.gethostname(), "command": command}
            (job / probes.STARTED).write_text(json.dumps(started))
        refused = client.post(f"/v1/analyses/{REFUSED}/augment", headers=headers, json=body(url))
        assert refused.status_code == 429, refused.text
        assert "1 probe, 1 augment already running for this key (of 2)" in refused.json()["detail"]["error"]
        assert not (api.settings.analyses_dir / REFUSED / augments.JOB_DIR).exists()
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
