"""GET /v1/diff over two analyses of one tenant: paired deltas, tenant isolation, one error body shape."""

from __future__ import annotations

from tests.serve.conftest import wait_for
from tests.serve.test_api import ROWS, jsonl, upload


def analysis(client, key, rows) -> str:
    up = upload(client, key, data=jsonl(rows)).json()
    r = client.post("/v1/analyses", headers=key, json={"upload_ids": [up["id"]], "metrics": {"min_rows": 2}})
    done = wait_for(client, key, r.json()["id"])
    assert done["status"] == "succeeded", done
    return str(done["id"])


def test_diff_of_two_analyses_pairs_rows_and_keeps_tenants_apart(client, key, other_key) -> None:
    a = analysis(client, key, ROWS)
    # B: every math row flips (right <-> wrong), trivia unchanged; two rows only in B
    flipped = [{**r, "score": 1.0 - r["score"]} if r["benchmark"] == "math" else r for r in ROWS]
    extra = [{**ROWS[0], "id": f"new{i}"} for i in range(2)]
    b = analysis(client, key, flipped + extra)
    r = client.get("/v1/diff", headers=key, params={"a": a, "b": b, "resamples": 200, "min_rows": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["format_version"] == 1 and body["kind"] == "cg_ray.diff"
    assert body["counts"]["paired"] == 40 and body["counts"]["only_b"] == 2 and body["counts"]["only_a"] == 0
    assert body["runs"]["a"]["path"] == a and body["runs"]["b"]["path"] == b  # ids, never server paths
    listed = body["top_regressed"] + body["top_improved"]
    assert listed, body["counts"]
    for entry in listed:
        math = [x for x in entry["per_benchmark"] if x["benchmark"] == "math"]
        trivia = [x for x in entry["per_benchmark"] if x["benchmark"] == "trivia"]
        assert all(x["delta_chi_model"] == 0 for x in trivia)
        assert math and math[0]["delta_chi_model"] != 0
    # the same analysis twice: nothing changes
    same = client.get("/v1/diff", headers=key, params={"a": a, "b": a, "resamples": 50}).json()
    assert same["counts"]["confident_regressed"] == 0 and same["counts"]["confident_improved"] == 0
    # another key sees neither analysis; an unknown id is 404 with the one error shape
    assert client.get("/v1/diff", headers=other_key, params={"a": a, "b": b}).status_code == 404
    missing = client.get("/v1/diff", headers=key, params={"a": a, "b": "ana_nope"})
    assert missing.status_code == 404 and set(missing.json()["detail"]) == {"error", "line", "field", "request_id"}
    assert client.get("/v1/diff", headers=key, params={"a": a}).json()["detail"]["field"] == "b"


def test_analyses_without_shared_rows_are_422_naming_them(client, key, settings) -> None:
    a = analysis(client, key, ROWS[:20])
    b = analysis(client, key, ROWS[20:])
    r = client.get("/v1/diff", headers=key, params={"a": a, "b": b})
    assert r.status_code == 422
    error = r.json()["detail"]["error"]
    assert "share no rows" in error and a in error and b in error and str(settings.data_dir) not in error
