"""The service takes the product's own rows as they are (issue #32): a run's rows.parquet (nested `facts`
metadata, concept columns, score_status) and its JSONL / CSV exports upload, and analyse through the API with
the nested field stored as JSON and skipped by slices and adjustment with a note, as `cg-ray metrics` does."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.serve.conftest import wait_for
from tests.serve.product_rows import (
    WEAK_KINDS,
    csv_export,
    jsonl_export,
    jsonl_export_with_objects,
    write_product_rows,
)

DEMO_ROWS = Path(__file__).resolve().parents[2] / "runs" / "default" / "rows.parquet"


def _upload(client, headers, name: str, data: bytes):
    return client.post("/v1/uploads", headers=headers, files={"file": (name, data, "application/octet-stream")})


def test_rows_parquet_and_its_exports_upload_as_they_are(client, key, tmp_path) -> None:
    rows = tmp_path / "rows.parquet"
    original = write_product_rows(rows)
    files = {
        "rows.parquet": rows.read_bytes(),
        "rows.jsonl": jsonl_export(rows),
        "objects.jsonl": jsonl_export_with_objects(rows),
        "rows.csv": csv_export(rows),
    }
    stored = {}
    for name, data in files.items():
        r = _upload(client, key, name, data)
        assert r.status_code == 201, (name, r.text)
        up = r.json()
        assert up["n_rows"] == original.num_rows and up["has_scores"], name
        assert up["benchmarks"] == sorted(set(original.column("benchmark").to_pylist())), name
        (note,) = up["fields"]["notes"]
        assert "'facts'" in note and "nested" in note and "not used by slices or adjustment" in note, note
        stored[name] = client.get(f"/v1/uploads/{up['id']}", headers=key).json()
    # Every form keeps the product's ids and metadata exactly (the object stored as the pipeline writes it).
    ids = {name: up["id"] for name, up in stored.items()}
    tables = {name: _stored_table(client, key, ids[name]) for name in ids}
    for name, table in tables.items():
        assert table.column("row_id").to_pylist() == original.column("row_id").to_pylist(), name
        assert table.column("metadata").to_pylist() == original.column("metadata").to_pylist(), name
        assert table.column("score").to_pylist() == original.column("score").to_pylist(), name
        assert table.column("response").to_pylist() == original.column("response").to_pylist(), name


def _stored_table(client, key, upload_id: str):
    """What an analysis of the upload reads back: its rows, through the run's rows.parquet download."""
    a = client.post("/v1/analyses", headers=key, json={"upload_ids": [upload_id], "text": "prompt_response"})
    assert a.status_code == 202, a.text
    status = wait_for(client, key, a.json()["id"], timeout=120)
    assert status["status"] == "succeeded", status
    got = client.get(f"/v1/analyses/{a.json()['id']}/artifacts/rows.parquet", headers=key)
    return pq.read_table(io.BytesIO(got.content))


def test_nested_metadata_is_skipped_by_slices_and_adjustment_with_a_note(client, key, tmp_path) -> None:
    rows = tmp_path / "rows.parquet"
    write_product_rows(rows)
    up = _upload(client, key, "rows.jsonl", jsonl_export(rows)).json()
    body = {"upload_ids": [up["id"]], "text": "prompt_response", "metrics": {"adjust_for": "kind,facts"}}
    a = client.post("/v1/analyses", headers=key, json=body).json()
    status = wait_for(client, key, a["id"], timeout=120)
    assert status["status"] == "succeeded", status
    beyond = client.get(f"/v1/analyses/{a['id']}/summary", headers=key).json()["profile"]["beyond"]
    assert beyond["skipped_fields"]["facts"].startswith("nested value"), beyond
    assert beyond["adjusted_for"] == ["kind"]
    assert any("facts: skipped (nested value" in note for note in beyond["notes"]), beyond["notes"]
    slices = client.get(f"/v1/analyses/{a['id']}/weaknesses", headers=key, params={"kind": "slices"}).json()
    assert slices["items"], slices
    assert all("facts" not in item["conditions"] for item in slices["items"])
    # The weakest slices are the two kinds answered wrong (`kind` and `benchmark` split the rows alike).
    weakest = [item["conditions"] for item in slices["items"][:2]]
    assert {c.get("kind") or c["benchmark"].removeprefix("probes_") for c in weakest} == set(WEAK_KINDS), weakest


@pytest.mark.skipif(not DEMO_ROWS.is_file(), reason="no demo run here (make demo writes runs/default/)")
def test_the_demo_rows_parse_as_they_are() -> None:
    import pandas as pd

    from cg_ray.serve.settings import Limits
    from cg_ray.serve.uploads import parse_file

    demo = pq.read_table(DEMO_ROWS)
    for name, data in {
        "rows.parquet": DEMO_ROWS.read_bytes(),
        "rows.jsonl": str(pd.read_parquet(DEMO_ROWS).to_json(orient="records", lines=True)).encode(),
    }.items():
        parsed = parse_file(data, name, None, None, "rows", Limits())
        assert parsed.table.column("row_id").to_pylist() == demo.column("row_id").to_pylist(), name
        assert parsed.table.column("metadata").to_pylist() == demo.column("metadata").to_pylist(), name
        assert any("'facts'" in note for note in parsed.notes), parsed.notes


@pytest.mark.slow
def test_rows_parquet_and_jsonl_export_through_ray_serve(monkeypatch) -> None:
    """The same round trip through the deployed application (Ray Serve on 127.0.0.1, the hashing reader)."""
    import httpx

    from cg_ray.testing.local_serve import FAKE_READER, deploy, local_serve, tenant

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    tmp = Path(tempfile.mkdtemp(prefix="cgu", dir="/tmp"))  # short: Ray's socket paths have a length limit
    data = tmp / "data"
    try:
        rows = tmp / "rows.parquet"
        original = write_product_rows(rows)
        with local_serve(tmp) as port:
            url = deploy(port, data, FAKE_READER, max_batch=16, replicas=1)
            headers = tenant(data, "ci")
            with httpx.Client(base_url=url, timeout=60) as client:
                for name, body in (("rows.parquet", rows.read_bytes()), ("rows.jsonl", jsonl_export(rows))):
                    up = _upload(client, headers, name, body)
                    assert up.status_code == 201, (name, up.text)
                    ana = client.post("/v1/analyses", headers=headers, json={"upload_ids": [up.json()["id"]]})
                    assert ana.status_code == 202, ana.text
                    status = _finished(client, headers, ana.json()["id"])
                    assert status["status"] == "succeeded", (name, status)
                    summary = client.get(f"/v1/analyses/{ana.json()['id']}/summary", headers=headers).json()
                    assert summary["n_rows"] == original.num_rows, name
                    assert summary["profile"]["beyond"]["skipped_fields"]["facts"].startswith("nested value"), name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _finished(client, headers: dict[str, str], analysis_id: str, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while (status := client.get(f"/v1/analyses/{analysis_id}", headers=headers).json())["status"] not in (
        "succeeded",
        "failed",
        "cancelled",
    ):
        assert time.monotonic() < deadline, json.dumps(status)
        time.sleep(0.5)
    return dict(status)
