"""Every REST route, with auth failures, cross-tenant attempts and bad uploads."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.serve.conftest import wait_for

ROWS = [
    {
        "id": f"q{i}",
        "benchmark": "math" if i % 2 else "trivia",
        "prompt": f"what is {i} plus {i}",
        "response": f"it is {2 * i}",
        "score": float(i % 3 == 0),
    }
    for i in range(40)
]


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def upload(client, headers, data: bytes | None = None, name="bench.jsonl", ctype="application/jsonl", **form):
    data = jsonl(ROWS) if data is None else data
    return client.post("/v1/uploads", headers=headers, files={"file": (name, data, ctype)}, data=form)


def test_health(client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["d_sae"] == 64
    assert "/v1/score" in client.get("/openapi.json").json()["paths"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope"}, {"X-API-Key": "cgr_abc_def"}])
def test_every_v1_route_needs_a_valid_key(client, headers) -> None:
    for method, path in [
        ("get", "/v1/uploads"),
        ("get", "/v1/uploads/upl_x"),
        ("get", "/v1/analyses"),
        ("get", "/v1/analyses/ana_x/concepts"),
        ("get", "/v1/analyses/ana_x/weaknesses"),
        ("post", "/v1/analyses"),
        ("post", "/v1/score"),
        ("post", "/v1/diff-models"),
        ("get", "/v1/diff-models/ana_x"),
        ("get", "/v1/diff-models/ana_x/concepts/1"),
    ]:
        assert getattr(client, method)(path, headers=headers).status_code == 401, path


def test_revoked_key_is_refused(service, key) -> None:
    client, store = service
    from cg_ray.serve.keys import create_key, revoke_key

    key_id, raw = create_key(store, "temp")
    assert client.get("/v1/uploads", headers={"X-API-Key": raw}).status_code == 200
    revoke_key(store, key_id)
    assert client.get("/v1/uploads", headers={"X-API-Key": raw}).status_code == 401


def test_upload_analysis_results_end_to_end(client, key, settings) -> None:
    r = upload(client, key)
    assert r.status_code == 201, r.text
    up = r.json()
    assert up["n_rows"] == 40 and up["benchmarks"] == ["math", "trivia"] and up["has_scores"]
    assert {"id", "prompt", "response", "score", "benchmark"} <= set(up["fields"]["detected"])
    assert client.get(f"/v1/uploads/{up['id']}", headers=key).json()["id"] == up["id"]
    assert [u["id"] for u in client.get("/v1/uploads", headers=key).json()] == [up["id"]]

    r = client.post("/v1/analyses", headers=key, json={"upload_ids": [up["id"]], "text": "prompt_response"})
    assert r.status_code == 202, r.text
    status = wait_for(client, key, r.json()["id"])
    assert status["status"] == "succeeded", status
    aid = status["id"]

    summary = client.get(f"/v1/analyses/{aid}/summary", headers=key).json()
    assert summary["n_rows"] == 40 and [b["benchmark"] for b in summary["benchmarks"]] == ["math", "trivia"]

    page = client.get(
        f"/v1/analyses/{aid}/concepts", headers=key, params={"sort": "X_bench", "order": "desc", "limit": 5}
    ).json()
    assert page["total"] == 64 and len(page["items"]) == 5
    xb = [c["X_bench"] for c in page["items"]]
    assert xb == sorted(xb, reverse=True)
    scored = client.get(f"/v1/analyses/{aid}/concepts", headers=key, params={"scored_only": True, "limit": 1000}).json()
    assert all(c["X_model"] is not None for c in scored["items"])
    missing = client.get(f"/v1/analyses/{aid}/concepts", headers=key, params={"class": "missing"}).json()
    assert all(c["coverage_class"] == "missing" for c in missing["items"])
    in_math = client.get(
        f"/v1/analyses/{aid}/concepts", headers=key, params={"benchmark": "math", "limit": 1000}
    ).json()
    assert 0 < in_math["total"] < 64

    top = page["items"][0]["concept_id"]
    detail = client.get(f"/v1/analyses/{aid}/concepts/{top}", headers=key).json()
    assert detail["concept_id"] == top and detail["benchmarks"]
    examples = detail["best_examples"] + detail["worst_examples"]
    assert examples and all(e["text"] for e in examples)
    assert all(e["score"] >= 0.5 for e in detail["best_examples"]) and all(
        e["score"] < 0.5 for e in detail["worst_examples"]
    )
    assert client.get(f"/v1/analyses/{aid}/concepts/64", headers=key).status_code == 404

    parquet = client.get(f"/v1/analyses/{aid}/artifacts/concepts.parquet", headers=key)
    assert pq.read_table(io.BytesIO(parquet.content)).num_rows == 64

    # The weakness profile: rank order, intervals around X_model, support, groups.
    weak = client.get(f"/v1/analyses/{aid}/weaknesses", headers=key, params={"limit": 5})
    assert weak.status_code == 200, weak.text
    profile = weak.json()
    assert profile["kind"] == "weaknesses" and profile["rank_by"] == "x_model"
    assert 0 < len(profile["items"]) <= 5
    assert [e["rank"] for e in profile["items"]] == list(range(1, len(profile["items"]) + 1))
    for e in profile["items"]:
        assert e["X_model_low"] <= e["X_model"] <= e["X_model_high"] and e["concept_id"] in e["members"]
    values = [e["X_model"] for e in profile["items"]]  # the default order: the paper's plain X_model
    assert values == sorted(values)
    strengths = client.get(f"/v1/analyses/{aid}/weaknesses", headers=key, params={"kind": "strengths"}).json()
    assert strengths["kind"] == "strengths"
    assert client.get(f"/v1/analyses/{aid}/weaknesses", headers=key, params={"kind": "nope"}).status_code == 422
    # Beyond the metadata: the weakest slices (here: by benchmark, the upload's only field) and failure modes.
    slices = client.get(f"/v1/analyses/{aid}/weaknesses", headers=key, params={"kind": "slices"})
    assert slices.status_code == 200, slices.text
    sl = slices.json()
    # (20 rows a benchmark: at slice_min_rows on the half a slice is chosen on, so likely none here)
    assert sl["kind"] == "slices" and sl["total"] == len(sl["items"])
    assert all(s["conditions"] in ({"benchmark": "math"}, {"benchmark": "trivia"}) for s in sl["items"])
    # judged held out: confirmed slices first; the held-out mean (null without held-out rows) in its interval
    assert [s["confirmed"] for s in sl["items"]] == sorted((s["confirmed"] for s in sl["items"]), reverse=True)
    assert sl["n_confirmed"] == sum(s["confirmed"] for s in sl["items"]) and sl["judgement"]["splits"] == 10
    assert "folds" not in sl["judgement"] and sl["judgement"]["decision"].startswith("confirmed ⇔ q ≤ fdr")
    assert all(1 <= s["splits_selected"] <= 10 and "folds_selected" not in s for s in sl["items"])
    assert all(s["mean_score"] is None or s["low"] <= s["mean_score"] <= s["high"] for s in sl["items"])
    assert all(s["n_rows"] == 20 and 0 <= s["mean_in_sample"] <= 1 for s in sl["items"])
    modes = client.get(f"/v1/analyses/{aid}/weaknesses", headers=key, params={"kind": "failure_modes"}).json()
    assert modes["kind"] == "failure_modes" and modes["adjusted_for"] == ["benchmark"]
    assert all(m["description"] and isinstance(m["confirmed"], bool) for m in modes["items"])
    assert all(
        m["heldout_residual"] is None
        or m["heldout_residual_low"] <= m["heldout_residual"] <= m["heldout_residual_high"]
        for m in modes["items"]
    )
    assert all(len(m["term_shares"]) == len(m["terms"]) and "variants" not in m for m in modes["items"])
    by_bound = client.get(
        f"/v1/analyses/{aid}/concepts", headers=key, params={"sort": "X_model_high", "scored_only": True}
    ).json()
    bounds = [c["X_model_high"] for c in by_bound["items"]]
    assert bounds == sorted(bounds)
    weak_file = client.get(f"/v1/analyses/{aid}/artifacts/weaknesses.parquet", headers=key)
    assert pq.read_table(io.BytesIO(weak_file.content)).num_rows >= len(profile["items"])
    csv = client.get(f"/v1/analyses/{aid}/artifacts/concepts.csv", headers=key)
    assert csv.status_code == 200 and csv.text.startswith('"concept_id"')
    assert client.get(f"/v1/analyses/{aid}/artifacts/..%2F..%2Fetc%2Fpasswd", headers=key).status_code == 404
    assert client.get(f"/v1/analyses/{aid}/artifacts/cg_ray.db", headers=key).status_code == 404


def test_cross_tenant_access_is_404(client, key, other_key) -> None:
    up = upload(client, key).json()
    aid = client.post("/v1/analyses", headers=key, json={"upload_ids": [up["id"]]}).json()["id"]
    wait_for(client, key, aid)
    for path in (
        f"/v1/uploads/{up['id']}",
        f"/v1/analyses/{aid}",
        f"/v1/analyses/{aid}/summary",
        f"/v1/analyses/{aid}/concepts",
        f"/v1/analyses/{aid}/concepts/0",
        f"/v1/analyses/{aid}/weaknesses",
        f"/v1/analyses/{aid}/artifacts/rows.parquet",
    ):
        assert client.get(path, headers=other_key).status_code == 404, path
    assert client.get("/v1/uploads", headers=other_key).json() == []
    assert client.get("/v1/analyses", headers=other_key).json() == []
    # Nor can another key analyse someone else's upload.
    assert client.post("/v1/analyses", headers=other_key, json={"upload_ids": [up["id"]]}).status_code == 404


def test_json_rows_upload_with_mapping(client, key) -> None:
    rows = [{"question": "2+2", "answer": "4", "correct": 1}, {"question": "3+3", "answer": "7", "correct": 0}]
    body = {
        "name": "mini",
        "rows": rows,
        "mapping": {"id": None, "prompt": "question", "response": "answer", "score": "correct"},
    }
    r = client.post("/v1/uploads/json", headers=key, json=body)
    assert r.status_code == 201, r.text
    assert r.json()["n_rows"] == 2 and r.json()["benchmarks"] == ["mini"]


def test_upload_mapping_is_the_benchmark_field_mapping(client, key) -> None:
    """One FieldMapping: parts the client leaves unset keep the upload defaults; dotted paths and prompt
    lists work as for benchmark sources; parts only sources use are refused."""
    rows = [{"q": {"text": "2+2"}, "ctx": "sums", "score": 1, "benchmark": "arith"}, {"q": {"text": "3+3"}, "score": 0}]
    body = {"name": "mini", "rows": rows, "mapping": {"prompt": ["ctx", "q.text"]}}
    r = client.post("/v1/uploads/json", headers=key, json=body)
    assert r.status_code == 201, r.text
    up = r.json()
    assert up["has_scores"] and up["benchmarks"] == ["arith", "mini"]
    assert up["fields"]["mapping"] == {
        "id": "id",
        "benchmark": "benchmark",
        "prompt": ["ctx", "q.text"],
        "response": "response",
        "reference": "reference",
        "score": "score",
        "metadata": None,  # null: the record's own `metadata` object, if it has one
    }
    body = {"name": "mini", "rows": rows, "mapping": {"prompt": "q.text", "choices": "opts"}}
    r = client.post("/v1/uploads/json", headers=key, json=body)
    assert r.status_code == 422 and r.json()["detail"]["field"] == "mapping.choices"


def test_other_upload_formats(client, key) -> None:
    csv = b"id,prompt,score\n1,hello world,1\n2,good bye,0\n"
    assert upload(client, key, csv, "b.csv", "text/csv").status_code == 201
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(ROWS[:5]), buf)
    r = upload(client, key, buf.getvalue(), "b.parquet", "application/octet-stream")
    assert r.status_code == 201 and r.json()["n_rows"] == 5


BAD_UPLOADS = {
    "invalid JSON line": (b'{"prompt": "a"}\n{"prompt": \n', "b.jsonl", "application/jsonl", 400, 2, None),
    "wrong encoding": (b'{"prompt": "a"}\n{"prompt": "\xff\xfe"}\n', "b.jsonl", "application/jsonl", 400, 2, None),
    "missing text fields": (
        b'{"prompt": "a"}\n{"id": "x"}\n',
        "b.jsonl",
        "application/jsonl",
        422,
        2,
        "prompt / response",
    ),
    "empty file": (b"", "b.jsonl", "application/jsonl", 400, None, None),
    "oversized file": (b'{"prompt": "a"}\n' * 20_000, "b.jsonl", "application/jsonl", 413, None, None),
    "oversized line": (b'{"prompt": "' + b"a" * 6000 + b'"}\n', "b.jsonl", "application/jsonl", 413, 1, None),
    "wrong content type": (b'{"prompt": "a"}\n', "b.jsonl", "image/png", 415, None, None),
    "unknown extension": (b'{"prompt": "a"}\n', "b.exe", "application/octet-stream", 415, None, None),
    "score above 1": (b'{"prompt": "a", "score": 1.5}\n', "b.jsonl", "application/jsonl", 422, 1, "score"),
    "score not a number": (
        b'{"prompt": "a"}\n{"prompt": "b", "score": "high"}\n',
        "b.jsonl",
        "application/jsonl",
        422,
        2,
        "score",
    ),
    "not an object": (b"[1, 2]\n", "b.jsonl", "application/jsonl", 422, 1, None),
    "duplicate id": (
        b'{"id": 1, "prompt": "a"}\n{"id": 1, "prompt": "b"}\n',
        "b.jsonl",
        "application/jsonl",
        422,
        2,
        "id",
    ),
    "csv ragged": (b"id,prompt\n1,a,extra\n", "b.csv", "text/csv", 400, 2, None),
    "not parquet": (b"PAR1 but not really", "b.parquet", "application/octet-stream", 400, None, None),
}


@pytest.mark.parametrize("case", sorted(BAD_UPLOADS))
def test_bad_uploads_are_rejected_and_nothing_is_stored(client, key, settings, case) -> None:
    data, name, ctype, status, line, field = BAD_UPLOADS[case]
    r = upload(client, key, data, name, ctype)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    if line is not None:
        assert detail["line"] == line and f"line {line}" in detail["error"]
    if field is not None:
        assert detail["field"] == field
    assert client.get("/v1/uploads", headers=key).json() == []
    assert list(settings.uploads_dir.iterdir()) == []


class GatedEncoder:
    """The real in-process encoder, held at a gate so analyses stay 'running' as long as a test needs."""

    def __init__(self, gate) -> None:
        from cg_ray.serve.encoding import LocalEncoder
        from cg_ray.testing.fakes import HashingReader

        self.inner = LocalEncoder(HashingReader(d_sae=64))
        self.d_sae = self.inner.d_sae
        self.gate = gate

    async def _wait(self) -> None:
        import asyncio

        while not self.gate.is_set():
            await asyncio.sleep(0.01)

    async def encode(self, texts):
        await self._wait()
        return await self.inner.encode(texts)

    async def encode_spans(self, texts, count_from, options):
        await self._wait()
        return await self.inner.encode_spans(texts, count_from, options)

    def describe(self):
        return self.inner.describe()


def _app(settings, store, encoder):
    from cg_ray.serve.api import create_api

    return create_api(settings, store, encoder, labels=None)


def test_concurrent_analysis_limit_and_restart_loses_nothing(settings) -> None:
    import threading

    from fastapi.testclient import TestClient

    from cg_ray.serve.db import Store
    from cg_ray.serve.keys import create_key

    gate = threading.Event()
    store = Store(settings.db_url)
    headers = {"X-API-Key": create_key(store, "alice")[1]}
    with TestClient(_app(settings, store, GatedEncoder(gate))) as client:
        up = upload(client, headers).json()
        codes = [
            client.post("/v1/analyses", headers=headers, json={"upload_ids": [up["id"]]}).status_code for _ in range(4)
        ]
        assert codes == [202, 202, 429, 429]  # max_concurrent_analyses = 2
        running = [a["id"] for a in client.get("/v1/analyses", headers=headers).json()]
        assert client.get(f"/v1/analyses/{running[0]}/summary", headers=headers).status_code == 409
    # The service stops with both analyses unfinished; a new one on the same database and data resumes them.
    gate.set()
    store = Store(settings.db_url)
    with TestClient(_app(settings, store, GatedEncoder(gate))) as client:
        assert [u["id"] for u in client.get("/v1/uploads", headers=headers).json()] == [up["id"]]
        for analysis_id in running:
            assert wait_for(client, headers, analysis_id)["status"] == "succeeded"
            assert client.get(f"/v1/analyses/{analysis_id}/summary", headers=headers).json()["n_rows"] == 40


def test_invalid_analysis_requests(client, key) -> None:
    up = upload(client, key).json()
    assert client.post("/v1/analyses", headers=key, json={"upload_ids": ["upl_nope"]}).status_code == 404
    r = client.post("/v1/analyses", headers=key, json={"upload_ids": [up["id"]], "metrics": {"epsilon": -1}})
    assert r.status_code == 422 and "epsilon" in r.text
    assert client.post("/v1/analyses", headers=key, json={"upload_ids": [up["id"]], "typo": 1}).status_code == 422
    assert client.post("/v1/analyses", headers=key, json={"upload_ids": []}).status_code == 422


def test_score_endpoint(client, key) -> None:
    texts = ["the cat sat on the mat", "the dog ran", "cats and dogs"]
    r = client.post("/v1/score", headers=key, json={"texts": texts, "scores": [1.0, 0.0, None], "top_k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["rows"]) == 3 and body["rows"][0]["n_tokens"] == 6
    acts = [c["activation"] for c in body["rows"][0]["top_concepts"]]
    assert acts == sorted(acts, reverse=True) and abs(acts[0] - 2 / 6) < 1e-6  # "the" twice out of six words
    assert body["summary"]["n_rows"] == 3 and body["summary"]["most_covered"]
    assert all(0 <= c["chi_model"] <= 1 for c in body["summary"]["lowest_chi_model"])
    assert client.post("/v1/score", headers=key, json={"texts": ["a"], "scores": [2.0]}).status_code == 422
    assert client.post("/v1/score", headers=key, json={"texts": ["a", "b"], "scores": [1.0]}).status_code == 422
    assert client.post("/v1/score", headers=key, json={"texts": ["  "]}).status_code == 422
    assert client.post("/v1/score", headers=key, json={"texts": []}).status_code == 422
    assert client.post("/v1/score", headers=key, json={"texts": ["x"] * 65}).status_code == 413


def test_upload_metadata_reaches_slices_and_residual_gaps(client, key) -> None:
    # 120 rows, one benchmark; `kind` is metadata. Rows of kind "hard" fail, and so do rows with "diagram"
    # in every kind: the slice names the first, the failure mode (adjusted for kind) the second. (120: the
    # hard slice's 40 rows keep ≥ slice_min_rows on the halves it is chosen on.)
    rows = [
        {
            "id": f"r{i}",
            "prompt": f"{'diagram ' if i % 4 == 0 else ''}question {i} about {'cats' if i % 2 else 'dogs'}",
            "response": "answer",
            "score": float(i % 3 != 0 and i % 4 != 0),
            "metadata": {"kind": "hard" if i % 3 == 0 else "easy", "source": "same"},
        }
        for i in range(120)
    ]
    up = upload(client, key, jsonl(rows)).json()
    a = client.post("/v1/analyses", headers=key, json={"upload_ids": [up["id"]], "text": "prompt"}).json()
    status = wait_for(client, key, a["id"])
    assert status["status"] == "succeeded", status
    sl = client.get(f"/v1/analyses/{a['id']}/weaknesses", headers=key, params={"kind": "slices"}).json()
    hard = sl["items"][0]
    assert hard["conditions"] == {"kind": "hard"} and hard["n_rows"] == 40 and hard["mean_in_sample"] == 0
    # measured on the deciding half's hard rows (each hard row is held out once, in one of the two halves)
    assert hard["confirmed"] and hard["q_value"] <= 0.1 and 0 < hard["n_heldout"] < 40
    modes = client.get(f"/v1/analyses/{a['id']}/weaknesses", headers=key, params={"kind": "failure_modes"}).json()
    assert modes["adjusted_for"] == ["kind"]
    # A metadata value JSON cannot hold (here a NaN inside a nested list) is refused with the line and field.
    bad = upload(client, key, jsonl([{"id": "x", "prompt": "p", "metadata": {"tags": ["a", float("nan")]}}]))
    assert bad.status_code == 422 and bad.json()["detail"]["field"] == "tags.1" and "line 1" in bad.text


def test_confirmed_findings_come_first_in_the_api(service, tmp_path) -> None:
    """A run written by hand in the held-out format (issue #38): confirmed entries first, then the candidates,
    each with its verdict and its minimum detectable effect; the whole file's count of confirmed ones and how
    they were judged (the decision rule, the MDE by mode size) beside them."""
    from cg_ray.serve.db import Analysis
    from cg_ray.serve.keys import create_key
    from tests.report.judged_run import DECISION, INTERVAL, mode, slice_, weakness, write_run

    client, store = service
    owner, raw = create_key(store, "carol")
    run_dir = write_run(
        tmp_path / "run",
        [mode(1, True, "draw"), mode(2, False, "pawn"), mode(3, False, "rook")],
        [slice_(1, True, "geometry"), slice_(2, False, "algebra")],
        [weakness(1, 7, True), weakness(2, 9, None)],
    )
    with store.session() as s:
        s.add(
            Analysis(
                id="ana_judged",
                owner=owner,
                upload_ids=[],
                mode="precomputed",
                options={},
                status="succeeded",
                run_dir=str(run_dir),
            )
        )
    url, headers = "/v1/analyses/ana_judged/weaknesses", {"X-API-Key": raw}
    modes = client.get(url, headers=headers, params={"kind": "failure_modes", "limit": 2}).json()
    assert modes["total"] == 3 and modes["n_confirmed"] == 1  # the file's, not the page's
    assert modes["judgement"]["fdr"] == 0.1 and modes["judgement"]["groups"]["n_groups"] == 1834
    first, candidate = modes["items"]
    assert (first["description"], first["confirmed"], first["q_value"]) == ("Rows with “draw”", True, 0.003)
    assert (candidate["description"], candidate["confirmed"]) == ("Rows with “pawn”", False)
    assert first["n_heldout"] == 412 and first["splits_selected"] == 9 and first["in_sample_residual"] == -0.24
    assert first["measured"] == "tested on 412 held-out rows (380 groups), chosen by 9 of 10 splits"
    assert first["power"] == "" and "folds_selected" not in first
    # a candidate: its minimum detectable effect, in figures and in words
    assert candidate["mde"] == 0.172 and candidate["splits_selected"] == 4
    assert candidate["power"] == (
        "too few rows to settle below a residual of -0.172 (its minimum detectable effect at 80% power)"
    )
    judged = modes["judgement"]
    assert (judged["splits"], judged["parts"], judged["decision"]) == (10, 20, DECISION)
    assert judged["interval"] == INTERVAL and judged["confirmed"]["slices_beyond_adjusted"] == 0
    assert judged["mde_by_size"][:2] == [{"n_rows": 50, "mde": 0.297}, {"n_rows": 100, "mde": 0.211}]
    assert modes["judged"].startswith("chosen on one half of the rows and tested on the other, over 10 grouped")
    assert modes["tried"] == "61 candidates tried"
    assert first["term_shares"] == [0.62, 0.4] and first["background_shares"] == [0.08, 0.1]
    assert "variants" not in first and first["examples"][0]["row_id"] == "r1"
    slices = client.get(url, headers=headers, params={"kind": "slices"}).json()
    assert [(s["slice"], s["confirmed"]) for s in slices["items"]] == [("task=geometry", True), ("task=algebra", False)]
    assert slices["items"][0]["suite_mean"] == 0.6 and slices["n_confirmed"] == 1
    weak = client.get(url, headers=headers).json()
    assert [(e["concept_id"], e["confirmed"], e["heldout_residual"]) for e in weak["items"]] == [
        (7, True, -0.18),
        (9, False, None),
    ]
    assert weak["items"][0]["mde"] == 0.172 and weak["items"][0]["power"] == ""  # confirmed: no power said
    # A run judged over folds (format 2, before repeated splits; the block was called `crossfit`) is still
    # served: its judgement as written.
    old = {"folds": 2, "fdr": 0.1, "groups": {"rule": "identical prompts", "n_groups": 1834}}
    write_run(run_dir, [mode(1, False, "pawn")], [slice_(1, False, "algebra")], judgement=old, key="crossfit")
    before = client.get(url, headers=headers, params={"kind": "failure_modes"})
    assert before.status_code == 200, before.text
    assert before.json()["judgement"]["folds"] == 2 and before.json()["judgement"]["splits"] is None
