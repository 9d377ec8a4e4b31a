"""An analysis the service computes in its own process records its reader in manifest.json as `cg-ray run`
does (the service's reader settings plus the text mode read, the encoder's factory, d_sae and SAE
fingerprint), so `reader_of_run` knows it and POST /v1/analyses/{id}/sensitivity accepts it (202) rather than
refusing a run that "records no reader". The service's encoder is the salted hashing stand-in of
tests/sensitivity (its factory `FAKE`); the sensitivity's work itself is stubbed: only its start is tested."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from fastapi.testclient import TestClient

from cg_ray import schemas as S
from cg_ray.activations.config import ReaderConfig
from cg_ray.activations.recorded import reader_of_run
from cg_ray.artifacts import contract as C
from cg_ray.artifacts.layout import RunDir
from cg_ray.sensitivity.config import SensitivityConfig
from cg_ray.serve import sensitivities
from cg_ray.serve.api import create_api
from cg_ray.serve.db import Store
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.jobs import write_job_file
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import SensitivitySettings, ServiceSettings
from cg_ray.testing.fakes import SaltedHashingReader
from tests.sensitivity.test_sensitivity import BLIND, FAKE, SALTED
from tests.serve.conftest import wait_for

READER = ReaderConfig(max_tokens=512, padding_side="left")  # not the defaults: recorded as set
ROWS = [
    {
        "id": f"q{i}",
        "benchmark": "math" if i % 2 else "trivia",
        "prompt": f"what is {i} plus {i} shape{i % 4}",
        "response": f"it is {2 * i} figure{i % 3}",
        "score": float(i % 3 == 0),
    }
    for i in range(40)
]


class Fingerprinted(SaltedHashingReader):
    """The salted stand-in with an SAE fingerprint, as the real reader's `describe()` gives it."""

    def describe(self) -> dict[str, Any]:
        described = super().describe()
        return {**described, "dtype": "float32", "sae": {**described["sae"], "weights_sha256": "ab" * 32}}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str], str]]:
    """(client, a key's headers, the id of an upload of ROWS)."""
    root = tmp_path_factory.mktemp("analysis-manifest")
    settings = ServiceSettings(
        data_dir=root / "data",
        reader=READER,
        sensitivity=SensitivitySettings(readers=[SALTED, BLIND], reader_factory=FAKE),
    )
    store = Store(settings.db_url)
    headers = {"X-API-Key": create_key(store, "alice")[1]}
    encoder = LocalEncoder(Fingerprinted(), reader_factory=FAKE)
    with TestClient(create_api(settings, store, encoder, labels=None)) as client:
        upload = client.post("/v1/uploads/json", headers=headers, json={"name": "b", "rows": ROWS})
        assert upload.status_code in (200, 201), upload.text
        yield client, headers, upload.json()["id"]


def analysed(client: TestClient, headers: dict[str, str], upload_id: str, **options: Any) -> tuple[str, Path]:
    made = client.post("/v1/analyses", headers=headers, json={"upload_ids": [upload_id], **options})
    assert made.status_code in (200, 201, 202) and not made.json().get("job_id"), made.text  # in the process
    done = wait_for(client, headers, made.json()["id"], timeout=120, interval=0.1)
    assert done["status"] == "succeeded", done
    analyses_dir = Path(client.app.state.service.settings.analyses_dir)  # type: ignore[attr-defined]
    return done["id"], analyses_dir / done["id"]


@pytest.mark.parametrize(("options", "text"), [({}, "prompt_response"), ({"text": "response"}, "response")])
def test_the_manifest_records_the_services_reader_text_and_factory(service, options, text) -> None:
    client, headers, upload_id = service
    _, folder = analysed(client, headers, upload_id, **options)
    run = RunDir(folder)
    recorded = reader_of_run(folder, run.read_summary().get("rows_file"))
    assert recorded.known and recorded.kind == "run", recorded.unknown
    assert recorded.factory == FAKE and recorded.text == text and recorded.d_sae == SaltedHashingReader.D_SAE
    assert recorded.config is not None and ReaderConfig.model_validate(recorded.config) == READER
    assert dict(recorded.config) == READER.model_dump(mode="json")
    assert recorded.sae.spec == READER.sae and recorded.sae.weights_sha256 == "ab" * 32
    manifest = C.read_document(run.manifest, C.RunManifest)  # the contract's model, cg_ray_version and all
    assert manifest.cg_ray_version and manifest.counts == {"rows": len(ROWS)}
    assert (manifest.model_extra or {})["reader"]["actors"][0]["dtype"] == "float32"
    assert [s["step"] for s in manifest.steps] == ["describe"]  # the steps after it still append to it
    for name in (S.ROWS_FILE, S.SUMMARY_FILE, S.CONCEPTS_FILE):
        assert run.has(name), name


def test_its_sensitivity_is_accepted_not_refused(service, monkeypatch: pytest.MonkeyPatch) -> None:
    client, headers, upload_id = service
    analysis_id, _ = analysed(client, headers, upload_id)
    started: list[SensitivityConfig] = []
    finished = threading.Event()

    def work(job: Path, run: RunDir, config: SensitivityConfig, lock: IO[str]) -> None:  # no re-reading here
        started.append(config)
        write_job_file(job / sensitivities.OUTCOME, json.dumps({"ok": True, "error": None, "finished_at": "now"}))
        lock.close()
        finished.set()

    monkeypatch.setattr(sensitivities, "_work", work)
    answer = client.post(f"/v1/analyses/{analysis_id}/sensitivity", headers=headers)
    assert answer.status_code == 202, answer.text
    assert answer.json()["settings"] == {"readers": [SALTED, BLIND], "fresh": False}
    assert finished.wait(30)
    assert [c.readers for c in started] == [(SALTED, BLIND)] and started[0].reader_factory == FAKE
    deadline = time.monotonic() + 10
    while client.get(f"/v1/analyses/{analysis_id}/sensitivity", headers=headers).json()["status"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_the_serve_encoder_records_its_deployments_factory_and_fingerprint() -> None:
    from cg_ray.serve.analyses import reader_record
    from cg_ray.serve.app import RemoteEncoder

    info = {"d_sae": 8, "describe": Fingerprinted().describe(), "factory": FAKE}  # EncoderDeployment.info()
    record = reader_record(READER, RemoteEncoder(object(), info), "prompt")  # type: ignore[arg-type]
    assert record is not None and record["config"] == {**READER.model_dump(mode="json"), "text": "prompt"}
    assert record["reader"]["factory"] == FAKE and record["reader"]["d_sae"] == 8
    assert record["reader"]["actors"][0]["sae_weights"] == "ab" * 32
    unknown = {"d_sae": 8, "describe": {}}  # a factory not said: no reader claimed
    assert reader_record(READER, RemoteEncoder(object(), unknown), "prompt") is None  # type: ignore[arg-type]
