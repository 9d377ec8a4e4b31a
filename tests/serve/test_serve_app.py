"""The Ray Serve application for real: both deployments, HTTP on 127.0.0.1, serve_config.yaml valid.

The reader is the fast hashing fake (same interface); the real reader's deployment is exercised in the
reader tests and the service benchmark.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_serve_config_is_valid_for_serve_and_for_build_app() -> None:
    from ray.serve.schema import ServeDeploySchema

    from cg_ray.serve.app import ServeArgs

    config = yaml.safe_load((ROOT / "serve_config.yaml").read_text())
    ServeDeploySchema.model_validate(config) if hasattr(
        ServeDeploySchema, "model_validate"
    ) else ServeDeploySchema.parse_obj(config)
    (app,) = config["applications"]
    assert app["import_path"] == "cg_ray.serve.app:build_app"
    ServeArgs(**app["args"])


def test_build_app_rejects_bad_args() -> None:
    from cg_ray.errors import ConfigError
    from cg_ray.serve.app import build_app

    with pytest.raises(ConfigError, match="typo"):
        build_app({"typo": 1})
    with pytest.raises(ConfigError, match="min_replicas"):
        build_app({"encoder": {"min_replicas": 3, "max_replicas": 1}})


@pytest.mark.slow
def test_serve_app_end_to_end(monkeypatch) -> None:
    from ray import serve

    from cg_ray.serve.app import build_app
    from cg_ray.testing.local_serve import local_serve, tenant

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    tmp = Path(tempfile.mkdtemp(prefix="cgs", dir="/tmp"))  # short: Ray's socket paths have a length limit
    data = tmp / "data"
    try:
        with local_serve(tmp) as port:
            app = build_app(
                {
                    "data_dir": str(data),
                    "encoder": {"reader_factory": "cg_ray.testing.fakes:HashingReader.from_config", "num_cpus": 0.5},
                }
            )
            serve.run(app, name="cg_ray", route_prefix="/")
            headers = tenant(data, "ci")
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                assert client.get("/readyz").json()["d_sae"] == 256
                rows = "".join(
                    json.dumps({"id": i, "prompt": f"row {i} text", "score": i % 2}) + "\n" for i in range(30)
                )
                up = client.post("/v1/uploads", headers=headers, files={"file": ("b.jsonl", rows, "application/jsonl")})
                assert up.status_code == 201, up.text
                ana = client.post("/v1/analyses", headers=headers, json={"upload_ids": [up.json()["id"]]}).json()
                assert _finished(client, headers, ana["id"])["status"] == "succeeded"
                assert client.get(f"/v1/analyses/{ana['id']}/summary", headers=headers).json()["n_rows"] == 30
                scored = client.post("/v1/score", headers=headers, json={"texts": ["a b a", "c"]}).json()
                assert scored["rows"][0]["top_concepts"][0]["activation"] == pytest.approx(2 / 3)
                assert client.get("/v1/uploads").status_code == 401
                _diff_models_through_the_encoder_deployment(client, headers)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _finished(client: httpx.Client, headers: dict[str, str], analysis_id: str) -> dict:
    deadline = time.monotonic() + 60
    while (status := client.get(f"/v1/analyses/{analysis_id}", headers=headers).json())["status"] not in (
        "succeeded",
        "failed",
    ):
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    return dict(status)


def _diff_models_through_the_encoder_deployment(client: httpx.Client, headers: dict[str, str]) -> None:
    """The span reading (response only, after the prompt) goes through the encoder deployment's handle."""
    ids = []
    for lead in ("", "zzz "):
        rows = "".join(
            json.dumps({"id": i, "prompt": f"zzz prompt {i}", "response": f"{lead}answer {i}"}) + "\n"
            for i in range(12)
        )
        up = client.post("/v1/uploads", headers=headers, files={"file": ("m.jsonl", rows, "application/jsonl")})
        ids.append(up.json()["id"])
    ana = client.post("/v1/diff-models", headers=headers, json={"upload_a": ids[0], "upload_b": ids[1], "min_rows": 2})
    assert ana.status_code == 202, ana.text
    assert _finished(client, headers, ana.json()["id"])["status"] == "succeeded"
    body = client.get(f"/v1/diff-models/{ana.json()['id']}", headers=headers, params={"sort": "delta"}).json()
    top = body["items"][0]
    # "zzz" is in every prompt (context only) and in B's answers: only B's answers count it
    assert top["frac_a"] == 0.0 and top["frac_b"] == 1.0 and top["delta_low"] > 0


def test_kuberay_manifest_holds_a_valid_serve_config() -> None:
    from ray.serve.schema import ServeDeploySchema

    from cg_ray.serve.app import ServeArgs

    manifest = yaml.safe_load((ROOT / "kuberay-rayservice.yaml").read_text())
    assert manifest["kind"] == "RayService" and manifest["apiVersion"] == "ray.io/v1"
    serve_config = yaml.safe_load(manifest["spec"]["serveConfigV2"])
    ServeDeploySchema.model_validate(serve_config)
    (app,) = serve_config["applications"]
    assert app["import_path"] == "cg_ray.serve.app:build_app"
    args = ServeArgs(**app["args"])
    assert args.encoder.num_gpus == 1 and args.encoder.max_replicas > args.encoder.min_replicas
    workers = manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert any(w["template"]["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu") for w in workers)
