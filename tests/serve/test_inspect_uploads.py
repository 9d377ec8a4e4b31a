"""inspect_ai logs uploaded to the service (`POST /v1/uploads`): a real log made by inspect itself (the mock
model of tests/benchmarks/test_inspect.py, 4 samples x 2 epochs, `match()`), as `.eval` and `.json`, stored as
rows whose scores are inspect's own per-sample values; bad logs refused with a 4xx naming the file, the sample
and the field, and nothing stored."""

from __future__ import annotations

import json
import zipfile
from io import BytesIO
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.benchmarks.test_inspect import inspects_own_scores, logs  # noqa: F401  (logs: the fixture)
from tests.serve.conftest import wait_for

CTYPES = {"eval": "application/zip", "json": "application/json"}


def upload(client, headers, data: bytes, name: str, ctype: str = "application/octet-stream", **form):
    return client.post("/v1/uploads", headers=headers, files={"file": (name, data, ctype)}, data=form)


def stored_rows(settings, upload_id: str) -> dict[str, dict]:
    table = pq.read_table(settings.uploads_dir / f"{upload_id}.parquet")
    return {r["row_id"]: r for r in table.to_pylist()}


def assert_nothing_stored(client, key, settings) -> None:
    assert client.get("/v1/uploads", headers=key).json() == []
    assert list(settings.uploads_dir.iterdir()) == []


def json_log_without_score(path: Path, sample: str, epoch: int) -> bytes:
    """The .json log with one sample-epoch's scores removed (as a sample that errored before scoring)."""
    doc = json.loads(path.read_bytes())
    (entry,) = [s for s in doc["samples"] if s["id"] == sample and s["epoch"] == epoch]
    entry["scores"] = {}
    return json.dumps(doc, indent=2).encode()


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_a_real_log_uploads_to_rows_with_inspects_scores(client, key, settings, logs, fmt) -> None:  # noqa: F811
    path = logs[fmt]
    r = upload(client, key, path.read_bytes(), path.name, CTYPES[fmt])
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["n_rows"] == 8 and body["benchmarks"] == ["toy_qa"] and body["has_scores"] is True
    assert body["fields"]["source"] == {
        "kind": "inspect",
        "scorer_name": None,
        "missing_score": "error",
        "skipped": 0,
        "status": "success",
    }
    rows = stored_rows(settings, body["id"])
    expected = inspects_own_scores(path)
    assert {rid: row["score"] for rid, row in rows.items()} == expected
    assert sorted(set(expected.values())) == [0.0, 1.0]
    q2 = rows["toy_qa-q2#1"]
    assert q2["prompt"] == "system:\nAnswer in one word.\n\nuser:\nCapital of France?"
    assert q2["response"] == "Lyon" and q2["reference"] == "Paris" and q2["benchmark"] == "toy_qa"
    assert json.loads(q2["metadata"]) == {
        "sample_id": "q2",
        "epoch": 1,
        "target": "Paris",
        "task": "toy_qa",
        "topic": "geo",
    }
    # The scorer named, and the benchmark given, as upload options.
    named = upload(client, key, path.read_bytes(), path.name, scorer_name="match", benchmark="qa")
    assert named.status_code == 201, named.text
    assert named.json()["benchmarks"] == ["qa"] and named.json()["fields"]["source"]["scorer_name"] == "match"


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_a_truncated_log_is_refused_naming_the_file(client, key, settings, logs, fmt) -> None:  # noqa: F811
    data = logs[fmt].read_bytes()
    r = upload(client, key, data[: len(data) // 2], "toy.cut." + fmt, CTYPES[fmt])
    assert r.status_code == 400, r.text
    error = r.json()["detail"]["error"]
    assert error.startswith(f"toy.cut.{fmt}: ") and "not a readable inspect_ai log" in error
    assert_nothing_stored(client, key, settings)


def test_a_truncated_sample_is_refused_naming_the_file_and_sample(client, key, settings, logs) -> None:  # noqa: F811
    """The zip directory intact, one sample's JSON cut short: inspect's reader fails on that sample."""
    src = zipfile.ZipFile(logs["eval"])
    out = BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info.filename, data[:100] if info.filename == "samples/q3_epoch_1.json" else data)
    r = upload(client, key, out.getvalue(), "toy.eval")
    assert r.status_code == 400, r.text
    error = r.json()["detail"]["error"]
    assert error.startswith("toy.eval: not a readable inspect_ai log: sample ") and "cannot be read" in error
    assert_nothing_stored(client, key, settings)


def test_an_unknown_scorer_is_refused_naming_the_field(client, key, settings, logs) -> None:  # noqa: F811
    r = upload(client, key, logs["eval"].read_bytes(), "toy.eval", scorer_name="includes")
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail["field"] == "scorer_name"
    assert detail["error"] == "toy.eval, field 'scorer_name': no scorer 'includes' in the log (scorers: match)"
    assert_nothing_stored(client, key, settings)


def test_a_sample_without_the_score_is_refused_or_skipped_with_a_count(client, key, settings, logs) -> None:  # noqa: F811
    data = json_log_without_score(logs["json"], "q2", 1)
    r = upload(client, key, data, "toy.json")
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail["field"] == "scores.match"
    assert detail["error"].startswith("toy.json, field 'scores.match': sample 'q2', epoch 1: no 'match' score")
    assert_nothing_stored(client, key, settings)

    r = upload(client, key, data, "toy.json", missing_score="skip")
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["n_rows"] == 7 and body["fields"]["source"]["skipped"] == 1
    assert "skipped 1 samples without the score (missing_score: skip)" in body["fields"]["notes"]
    assert "toy_qa-q2#1" not in stored_rows(settings, body["id"])


def test_options_that_do_not_fit_the_file_are_refused(client, key, settings, logs) -> None:  # noqa: F811
    rows = b'{"id": "1", "prompt": "p", "score": 1}\n'
    r = upload(client, key, rows, "b.jsonl", "application/jsonl", scorer_name="match")
    assert r.status_code == 422 and r.json()["detail"]["field"] == "scorer_name", r.text
    r = upload(client, key, logs["eval"].read_bytes(), "toy.eval", mapping='{"score": "acc"}')
    assert r.status_code == 422 and r.json()["detail"]["field"] == "mapping", r.text
    r = upload(client, key, logs["eval"].read_bytes(), "toy.eval", missing_score="sometimes")
    assert r.status_code == 422 and r.json()["detail"]["field"] == "missing_score", r.text
    assert_nothing_stored(client, key, settings)
    # A .json upload that is not a log still reads as JSONL rows.
    r = upload(client, key, rows, "b.json", "application/json")
    assert r.status_code == 201 and r.json()["n_rows"] == 1, r.text


def test_an_uploaded_log_is_analysed_to_the_end(client, key, logs) -> None:  # noqa: F811
    r = upload(client, key, logs["eval"].read_bytes(), logs["eval"].name)
    assert r.status_code == 201, r.text
    r = client.post("/v1/analyses", headers=key, json={"upload_ids": [r.json()["id"]], "text": "prompt_response"})
    assert r.status_code == 202, r.text
    status = wait_for(client, key, r.json()["id"])
    assert status["status"] == "succeeded", status
    summary = client.get(f"/v1/analyses/{status['id']}/summary", headers=key).json()
    assert summary["n_rows"] == 8 and [b["benchmark"] for b in summary["benchmarks"]] == ["toy_qa"]
