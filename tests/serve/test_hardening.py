"""One test per defect of issue #12 (items 1-4): 500s, limits, inputs that must be refused, leaks."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.serve.conftest import wait_for
from tests.serve.test_api import ROWS, jsonl, upload


def parquet(table: pa.Table, **kwargs) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kwargs)
    return buf.getvalue()


def assert_nothing_stored(client, key, settings) -> None:
    assert client.get("/v1/uploads", headers=key).json() == []
    assert [p for p in settings.uploads_dir.iterdir()] == []


# ---- 500s: every one is now a 4xx naming the line and field

HOSTILE_LINES = {
    "score with hundreds of digits": (b'{"prompt": "a", "score": 1' + b"0" * 400 + b"}\n", 422, "score"),
    "id with thousands of digits": (b'{"prompt": "a", "id": ' + b"9" * 4400 + b"}\n", 400, None),
    "deeply nested brackets": (b'{"prompt": "a", "x": ' + b"[" * 2000 + b"]" * 2000 + b"}\n", 400, None),
    "score true": (b'{"prompt": "a", "score": true}\n', 422, "score"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_LINES))
def test_hostile_jsonl_line_is_a_4xx_naming_the_line(client, key, settings, case) -> None:
    line, status, field = HOSTILE_LINES[case]
    settings_limits = settings.limits
    if len(line) > settings_limits.max_line_bytes:
        pytest.skip("over the line limit of the test service")
    r = upload(client, key, b'{"prompt": "ok"}\n' + line)
    assert r.status_code == status, r.text
    assert r.json()["detail"]["line"] == 2 and r.json()["detail"]["field"] == field
    assert_nothing_stored(client, key, settings)


def test_hostile_lines_through_the_parser_with_real_limits() -> None:
    """The same lines under the default limits (1 MiB lines), straight through the parser layer."""
    from cg_ray.serve.settings import Limits
    from cg_ray.serve.uploads import UploadError, parse_file

    for line, _, field in HOSTILE_LINES.values():
        with pytest.raises(UploadError) as err:
            parse_file(line, "b.jsonl", None, None, "b", Limits())
        assert err.value.line == 1 and err.value.field == field


def test_json_body_with_hostile_values(client, key, settings) -> None:
    huge = {"name": "b", "rows": [{"prompt": "a", "score": 10**400}]}
    body = json.dumps(huge).encode()
    r = client.post("/v1/uploads/json", headers={**key, "Content-Type": "application/json"}, content=body)
    assert r.status_code == 422 and r.json()["detail"]["field"] == "score"
    nested = b'{"name": "b", "rows": [{"prompt": "a", "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]}"
    r = client.post("/v1/uploads/json", headers={**key, "Content-Type": "application/json"}, content=nested)
    assert 400 <= r.status_code < 500, r.text
    assert_nothing_stored(client, key, settings)


def test_battles_with_deep_nesting_is_a_4xx(client, key, settings) -> None:
    data = b"[" * 2400 + b"]" * 2400 + b"\n"
    r = client.post("/v1/battles", headers=key, files={"file": ("b.jsonl", data, "application/jsonl")})
    assert r.status_code in (400, 422) and r.json()["detail"]["line"] == 1, r.text
    assert_nothing_stored(client, key, settings)


def test_parquet_unmapped_out_of_range_timestamp_is_not_decoded(client, key) -> None:
    stamps = pa.array([-(2**62), 0], pa.timestamp("ns")).cast(pa.timestamp("us"), safe=False)
    far = pa.array([253402300800 * 10**6 * 10, 0], pa.int64()).cast(pa.timestamp("us"))  # year ~ 80,000
    table = pa.table({"prompt": ["a", "b"], "score": [1.0, 0.0], "when": far, "other": stamps})
    r = upload(client, key, parquet(table), "t.parquet", "application/octet-stream")
    assert r.status_code == 201, r.text
    # mapped, it is refused as a 4xx, not a 500
    bad = pa.table({"prompt": ["a", "b"], "id": far})
    r = upload(client, key, parquet(bad), "u.parquet", "application/octet-stream")
    assert r.status_code == 400 and "Parquet" in r.json()["detail"]["error"], r.text


def test_csv_field_over_the_csv_module_limit(client, key, settings) -> None:
    from cg_ray.serve.settings import Limits
    from cg_ray.serve.uploads import parse_file

    big = b"id,prompt\n1," + b"a" * 200_000 + b"\n"
    parsed = parse_file(big, "b.csv", "text/csv", None, "b", Limits(max_tokens_per_row=100_000))
    assert parsed.table.num_rows == 1  # within our line limit (1 MiB): accepted, past the csv module's 131,072
    r = upload(client, key, b'id,prompt\n1,"' + b"a\n" * 3000 + b'"\n', "b.csv", "text/csv")
    assert r.status_code == 413 and r.json()["detail"]["field"] == "prompt", r.text  # one cell over max_line_bytes
    assert_nothing_stored(client, key, settings)


# ---- limits, checked before the work they bound


def test_zstd_bomb_is_refused_before_decoding() -> None:
    from cg_ray.serve.settings import Limits
    from cg_ray.serve.uploads import UploadError, parse_file

    table = pa.table({"prompt": ["a" * 1000] * 20_000})  # 20 MB of text, a few KB compressed
    data = parquet(table, compression="zstd", use_dictionary=False)
    assert len(data) < 100_000
    with pytest.raises(UploadError) as err:
        parse_file(data, "b.parquet", None, None, "b", Limits(max_rows=50_000, max_decoded_bytes=1 << 20))
    assert err.value.kind == "too_large" and "decodes to" in str(err.value)


def test_parquet_row_count_is_checked_from_the_metadata(client, key, settings) -> None:
    table = pa.table({"prompt": ["a"] * 600})  # max_rows = 500 in the test service
    r = upload(client, key, parquet(table), "b.parquet", "application/octet-stream")
    assert r.status_code == 413 and "600 rows" in r.json()["detail"]["error"]


def test_json_route_and_battles_are_bounded(client, key, settings) -> None:
    rows = [{"prompt": "x" * 900} for _ in range(300)]  # > 200,000 bytes
    r = client.post("/v1/uploads/json", headers=key, json={"name": "b", "rows": rows})
    assert r.status_code == 413, r.text
    r = client.post("/v1/uploads/json", headers=key, json={"name": "b", "rows": [{"prompt": "a"}] * 501})
    assert r.status_code == 413 and "501 rows" in r.text
    turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    battle = {"model_a": "m1", "model_b": "m2", "winner": "model_a", "conversation_a": turns, "conversation_b": turns}
    lines = b"".join(json.dumps({**battle, "question_id": str(i)}).encode() + b"\n" for i in range(501))
    r = client.post("/v1/battles", headers=key, files={"file": ("b.jsonl", lines, "application/jsonl")})
    assert r.status_code == 413 and "500" in r.json()["detail"]["error"], r.text
    assert_nothing_stored(client, key, settings)


def test_names_and_benchmark_counts_are_bounded(client, key, settings) -> None:
    r = upload(client, key, benchmark="b" * 201)
    assert r.status_code == 413 and r.json()["detail"]["field"] == "benchmark"
    many = jsonl([{"prompt": "a", "benchmark": f"b{i}"} for i in range(101)])
    r = upload(client, key, many)
    assert r.status_code == 413 and "distinct benchmarks" in r.json()["detail"]["error"]
    long_name = jsonl([{"prompt": "a", "benchmark": "x" * 300}])
    assert upload(client, key, long_name).status_code == 413
    assert_nothing_stored(client, key, settings)


def test_analysis_request_bounds(client, key) -> None:
    up = upload(client, key).json()["id"]
    r = client.post("/v1/analyses", headers=key, json={"upload_ids": [up], "model": "m" * 10_000})
    assert r.status_code == 413 and r.json()["detail"]["field"] == "model"
    r = client.post("/v1/analyses", headers=key, json={"upload_ids": [up] * 21})
    assert r.status_code == 413 and r.json()["detail"]["field"] == "upload_ids"
    r = client.post("/v1/analyses", headers=key, json={"upload_ids": [up, up]})
    assert r.status_code == 422 and "twice" in r.json()["detail"]["error"]
    assert client.get("/v1/analyses", headers=key).json() == []


def test_benchmarks_per_analysis_are_bounded(client, key) -> None:
    ids = []
    for part in range(3):
        rows = [{"prompt": "a", "benchmark": f"p{part}b{i}"} for i in range(40)]
        ids.append(upload(client, key, jsonl(rows)).json()["id"])
    r = client.post("/v1/analyses", headers=key, json={"upload_ids": ids})
    assert r.status_code == 413 and "120 distinct benchmarks" in r.json()["detail"]["error"]


def test_content_length_over_the_limit_is_refused_before_the_body(client, key, settings) -> None:
    headers = {**key, "Content-Type": "multipart/form-data; boundary=x", "Content-Length": "999999999"}
    r = client.post("/v1/uploads", headers=headers, content=b"--x--\r\n")
    assert r.status_code == 413 and r.json()["detail"]["request_id"] == r.headers["X-Request-ID"]

    def chunks():  # no Content-Length: counted as it streams in
        for _ in range(100):
            yield b"x" * 10_000

    r = client.post("/v1/uploads/json", headers={**key, "Content-Type": "application/json"}, content=chunks())
    assert r.status_code == 413, r.text
    assert_nothing_stored(client, key, settings)


# ---- refused


def test_mapping_naming_a_missing_column_is_refused(client, key, settings) -> None:
    r = upload(client, key, mapping=json.dumps({"prompt": "question"}))
    assert r.status_code == 422 and r.json()["detail"]["field"] == "mapping.prompt", r.text
    r = client.post("/v1/uploads/json", headers=key, json={"rows": ROWS, "mapping": {"score": "correct"}})
    assert r.status_code == 422 and r.json()["detail"]["field"] == "mapping.score"
    assert_nothing_stored(client, key, settings)


def test_response_text_without_responses_is_refused(client, key) -> None:
    up = upload(client, key, jsonl([{"prompt": f"q{i}", "score": 1.0} for i in range(5)])).json()["id"]
    r = client.post("/v1/analyses", headers=key, json={"upload_ids": [up], "text": "response"})
    assert r.status_code == 422 and r.json()["detail"]["field"] == "text"


# ---- leaks and CSV injection


def test_failed_analysis_shows_no_server_path(client, key, settings, monkeypatch) -> None:
    from cg_ray.serve import analyses

    def boom(*args, **kwargs):
        raise RuntimeError(f"cannot write {settings.data_dir.resolve()}/analyses/tmp123/summary.json")

    monkeypatch.setattr(analyses, "_compute_run", boom)
    up = upload(client, key).json()["id"]
    analysis_id = client.post("/v1/analyses", headers=key, json={"upload_ids": [up]}).json()["id"]
    status = wait_for(client, key, analysis_id)
    assert status["status"] == "failed" and analysis_id in status["error"]
    listing = client.get("/v1/analyses", headers=key).text
    for text in (json.dumps(status), listing):
        assert str(settings.data_dir.resolve()) not in text and "/analyses/" not in text and "Traceback" not in text


def test_unexpected_exception_is_a_500_with_a_request_id_only(settings, monkeypatch) -> None:
    from fastapi.testclient import TestClient

    from cg_ray.serve.api import create_api
    from cg_ray.serve.db import Store
    from cg_ray.serve.encoding import LocalEncoder
    from cg_ray.serve.keys import create_key
    from cg_ray.serve.routes import uploads as upload_routes
    from cg_ray.testing.fakes import HashingReader

    store = Store(settings.db_url)
    headers = {"X-API-Key": create_key(store, "alice")[1]}
    app = create_api(settings, store, LocalEncoder(HashingReader(d_sae=64)), labels=None)

    def broken(*args, **kwargs):
        raise OSError(f"disk full at {settings.data_dir.resolve()}")

    monkeypatch.setattr(upload_routes, "parse_rows", broken)
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.post("/v1/uploads/json", headers=headers, json={"rows": ROWS})
    assert r.status_code == 500
    detail = r.json()["detail"]
    assert detail["request_id"] == r.headers["X-Request-ID"] and detail["request_id"].startswith("req_")
    assert str(settings.data_dir) not in r.text and "OSError" not in r.text


def test_csv_downloads_neutralise_formulas(client, key) -> None:
    evil = "=cmd|' /C calc'!A0"
    rows = [{**r, "benchmark": evil if i % 2 else "-trivia"} for i, r in enumerate(ROWS)]
    up = upload(client, key, jsonl(rows)).json()["id"]
    analysis_id = client.post("/v1/analyses", headers=key, json={"upload_ids": [up]}).json()["id"]
    assert wait_for(client, key, analysis_id)["status"] == "succeeded"
    names = ["benchmark_concepts.csv", "concept_scores.csv", "concept_cg_coverage_summary.csv"]
    for name in names:
        r = client.get(f"/v1/analyses/{analysis_id}/artifacts/{name}", headers=key)
        assert r.status_code == 200, name
        cells = [c.strip('"') for line in r.text.splitlines() for c in line.split(",")]
        assert not any(c.startswith(("=", "+", "@", "\t", "\r")) for c in cells), name
        assert not any(
            c.startswith("-") and not c.lstrip("-").replace(".", "", 1).replace("e", "").isdigit() for c in cells if c
        ), name
    scores = client.get(f"/v1/analyses/{analysis_id}/artifacts/concept_scores.csv", headers=key).text
    assert "'=cmd|' /C calc'!A0_score" in scores.splitlines()[0]  # a header cell, neutralised


def test_neutralize_rule() -> None:
    from cg_ray.serve.csv_safe import neutralize

    assert [neutralize(c) for c in ["=1+1", "+x", "-x", "@x", "\tx", "\rx", "-0.25", "1e3", "ok", ""]] == [
        "'=1+1",
        "'+x",
        "'-x",
        "'@x",
        "'\tx",
        "'\rx",
        "-0.25",
        "1e3",
        "ok",
        "",
    ]


def test_redaction_of_paths() -> None:
    from cg_ray.serve.redact import scrub_paths

    assert scrub_paths("FileNotFoundError: /tmp/tmpab12/run/summary.json missing") == (
        "FileNotFoundError: <server path> missing"
    )


def test_a_relative_data_dir_is_resolved_so_no_message_shows_its_folders(tmp_path, monkeypatch) -> None:
    """serve_config.yaml ships `data_dir: serve_data`: a relative folder would pass scrub_paths (which knows
    absolute paths) and show `serve_data/analyses/ana_…` to a client, and a Ray job started in another folder
    would not find it."""
    from pathlib import Path

    from cg_ray.serve.redact import scrub_paths
    from cg_ray.serve.settings import ServiceSettings

    monkeypatch.chdir(tmp_path)
    settings = ServiceSettings(data_dir=Path("serve_data"))
    assert settings.data_dir == tmp_path.resolve() / "serve_data" and settings.analyses_dir.is_absolute()
    message = f"{settings.analyses_dir / 'ana_1' / 'run'}: the run does not record the model"
    assert "serve_data" not in scrub_paths(message) and "analyses" not in scrub_paths(message)
