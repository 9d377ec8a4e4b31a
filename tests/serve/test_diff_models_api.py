"""POST /v1/diff-models and its results: a planted difference found with its sign, both input forms (one
upload per model, or one upload whose `benchmark` field is the model), tenant isolation, the lifecycle,
and bad input answered 4xx naming the field (never a 500, never a server path)."""

from __future__ import annotations

import time

import pytest

from cg_ray.testing.fakes import word_concept
from tests.serve.conftest import wait_for
from tests.serve.test_api import jsonl, upload

D_SAE = 64  # the conftest's reader
N = 40


def planted_word() -> str:
    """A word whose concept is none of the shared words' (the fake reader hashes words to concepts)."""
    shared = {word_concept(w, D_SAE) for w in ("it", "is", *(str(2 * i) for i in range(N)))}
    return next(w for w in ("certainly", "indeed", "surely", "absolutely") if word_concept(w, D_SAE) not in shared)


def answers(planted: str | None = None, n: int = N) -> list[dict]:
    """Answers to the same n prompts; with `planted`, every answer starts with that word."""
    lead = f"{planted} " if planted else ""
    return [{"id": f"q{i}", "prompt": f"what is {i} plus {i}", "response": f"{lead}it is {2 * i}"} for i in range(n)]


def uploaded(client, key, rows, name="answers.jsonl") -> str:
    r = upload(client, key, data=jsonl(rows), name=name)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def finished(client, key, body: dict) -> str:
    r = client.post("/v1/diff-models", headers=key, json={"min_rows": 2, **body})
    assert r.status_code == 202, r.text
    assert r.json()["mode"] == "diff-models"
    done = wait_for(client, key, r.json()["id"])
    assert done["status"] == "succeeded", done
    return str(done["id"])


def test_a_planted_difference_is_found_with_its_sign(client, key, other_key, settings) -> None:
    word = planted_word()
    concept = word_concept(word, D_SAE)
    a = uploaded(client, key, answers(), "base.jsonl")
    b = uploaded(client, key, answers(word), "tuned.jsonl")
    ana = finished(client, key, {"upload_a": a, "upload_b": b, "model_b": "tuned"})
    r = client.get(f"/v1/diff-models/{ana}", headers=key, params={"sort": "delta", "order": "desc"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["models"] == {"a": "base.jsonl", "b": "tuned"}  # a name, else the upload's
    assert body["counts"]["compared"] == N and body["config"]["min_rows"] == 2
    assert "reader" not in body["config"] and str(settings.data_dir) not in r.text
    top = body["items"][0]
    assert top["concept_id"] == concept and top["frac_a"] == 0.0 and top["frac_b"] == 1.0
    assert top["delta"] == 1.0 and top["delta_low"] > 0 and top["hypothesis"] == "b_more" and top["confirmed"]
    assert top["heldout_low"] > 0 and body["confirmation"]["confirmed"] == {"a_more": 0, "b_more": 1}
    assert all(item["delta"] == 0 for item in body["items"][1:])  # nothing else differs
    assert [h["concept_id"] for h in body["hypotheses"]] == [concept]
    detail = client.get(f"/v1/diff-models/{ana}/concepts/{concept}", headers=key, params={"examples": 2}).json()
    assert detail["examples"]["a_more"] == [] and len(detail["examples"]["b_more"]) == 2
    example = detail["examples"]["b_more"][0]
    assert example["response_b"].startswith(word) and not example["response_a"].startswith(word)
    assert example["prompt"].startswith("what is") and example["s_tilde_b"] > 0 == example["s_tilde_a"]
    # another key sees nothing of it; a CG result route points to the diff-models one
    for path in (f"/v1/diff-models/{ana}", f"/v1/diff-models/{ana}/concepts/{concept}", f"/v1/analyses/{ana}"):
        assert client.get(path, headers=other_key).status_code == 404, path
    summary = client.get(f"/v1/analyses/{ana}/summary", headers=key)
    assert summary.status_code == 409 and f"/v1/diff-models/{ana}" in summary.json()["detail"]["error"]
    assert client.get(f"/v1/diff-models/{ana}/concepts/{(concept + 1) % D_SAE}", headers=key).status_code in (
        200,
        404,
    )
    # a CG analysis is not one of diff-models
    cg = client.post("/v1/analyses", headers=key, json={"upload_ids": [a]}).json()["id"]
    assert wait_for(client, key, cg)["status"] == "succeeded"
    assert client.get(f"/v1/diff-models/{cg}", headers=key).status_code == 404
    # deleted like any analysis: its folder goes and it answers 404
    assert client.delete(f"/v1/analyses/{ana}", headers=key).status_code == 200
    assert client.get(f"/v1/diff-models/{ana}", headers=key).status_code == 404
    assert not (settings.analyses_dir / ana).exists()


def test_one_upload_with_a_model_field(client, key) -> None:
    word = planted_word()
    rows = [{**r, "model": "base"} for r in answers()] + [{**r, "model": "tuned"} for r in answers(word)]
    rows += [{**r, "model": "other"} for r in answers()[:5]]
    r = client.post(
        "/v1/uploads/json", headers=key, json={"name": "mt", "rows": rows, "mapping": {"benchmark": "model"}}
    )
    assert r.status_code == 201, r.text
    up = r.json()
    assert sorted(up["benchmarks"]) == ["base", "other", "tuned"]
    # B − A: swapping the models flips the sign
    ana = finished(client, key, {"upload_id": up["id"], "model_a": "tuned", "model_b": "base"})
    body = client.get(f"/v1/diff-models/{ana}", headers=key, params={"hypotheses_only": True}).json()
    assert body["models"] == {"a": "tuned", "b": "base"} and body["total"] == 1
    item = body["items"][0]
    assert item["concept_id"] == word_concept(word, D_SAE) and item["delta"] == -1.0 and item["delta_high"] < 0
    assert item["hypothesis"] == "a_more"
    # a model the upload does not hold: 422 naming the field and listing the models
    missing = client.post(
        "/v1/diff-models", headers=key, json={"upload_id": up["id"], "model_a": "gpt-9", "model_b": "base"}
    )
    assert missing.status_code == 422
    assert missing.json()["detail"]["field"] == "model_a" and "base, other, tuned" in missing.json()["detail"]["error"]


def _bad_inputs() -> list[tuple[str, list[dict], list[dict], str, int | None]]:
    base = answers(n=6)
    return [
        (
            "prompt differs",
            base,
            [{**r, "prompt": r["prompt"] + "?"} if r["id"] == "q2" else r for r in base],
            "prompt",
            3,
        ),
        ("empty response", base, [{**r, "response": " "} if r["id"] == "q2" else r for r in base], "response", 3),
        ("no prompt", base, [{k: v for k, v in r.items() if k != "prompt"} for r in base], "prompt", 1),
        ("no shared id", base, [{**r, "id": "x" + r["id"]} for r in base], "upload_b", None),
        ("id twice", base, [*base, {**base[0], "benchmark": "other"}], "id", 7),
    ]


@pytest.mark.parametrize("case", _bad_inputs(), ids=lambda c: c[0])
def test_answers_that_do_not_pair_are_422_naming_the_field(client, key, settings, case) -> None:
    _, rows_a, rows_b, field, line = case
    a, b = uploaded(client, key, rows_a), uploaded(client, key, rows_b)
    r = client.post("/v1/diff-models", headers=key, json={"upload_a": a, "upload_b": b})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail["field"] == field and detail["line"] == line, detail
    assert str(settings.data_dir) not in detail["error"]
    assert client.get("/v1/analyses", headers=key).json() == []  # nothing was started


def test_bad_requests_are_4xx_naming_the_field(client, key, other_key) -> None:
    a, b = uploaded(client, key, answers()), uploaded(client, key, answers("indeed"))
    theirs = uploaded(client, other_key, answers())
    cases = [
        ({}, 422, "upload_id"),
        ({"upload_id": a, "upload_a": a, "upload_b": b}, 422, "upload_id"),
        ({"upload_id": a, "model_a": "x"}, 422, "model_b"),
        ({"upload_id": a, "model_a": "x", "model_b": "x"}, 422, "model_b"),
        ({"upload_a": a}, 422, "upload_b"),
        ({"upload_a": a, "upload_b": a}, 422, "upload_b"),
        ({"upload_a": a, "upload_b": b, "top": 1000}, 422, "top"),
        ({"upload_a": a, "upload_b": b, "confidence": 1.5}, 422, "confidence"),
        ({"upload_a": a, "upload_b": b, "model_a": "m" * 500}, 413, "model_a"),
        ({"upload_a": a, "upload_b": "upl_nope"}, 404, None),
        ({"upload_a": a, "upload_b": theirs}, 404, None),  # another key's upload is as absent as none
    ]
    for body, status, field in cases:
        r = client.post("/v1/diff-models", headers=key, json=body)
        assert r.status_code == status and r.json()["detail"]["field"] == field, (body, r.text)
    assert client.get("/v1/diff-models/ana_nope", headers=key).status_code == 404


def test_over_the_service_size_is_413(settings, tmp_path) -> None:
    from fastapi.testclient import TestClient

    from cg_ray.serve.api import create_api
    from cg_ray.serve.db import Store
    from cg_ray.serve.encoding import LocalEncoder
    from cg_ray.serve.keys import create_key
    from cg_ray.testing.fakes import HashingReader

    small = settings.model_copy(update={"small_analysis_rows": 10})
    store = Store(small.db_url)
    with TestClient(create_api(small, store, LocalEncoder(HashingReader(d_sae=D_SAE)), labels=None)) as client:
        key = {"X-API-Key": create_key(store, "k")[1]}
        a, b = uploaded(client, key, answers(n=6)), uploaded(client, key, answers("indeed", n=6))
        r = client.post("/v1/diff-models", headers=key, json={"upload_a": a, "upload_b": b})
        assert r.status_code == 413 and "cg-ray diff-models" in r.json()["detail"]["error"]


def test_cancelled_while_reading_it_publishes_nothing(settings) -> None:
    import threading

    from fastapi.testclient import TestClient

    from cg_ray.serve.db import Store
    from cg_ray.serve.keys import create_key
    from tests.serve.test_api import GatedEncoder, _app

    gate, store = threading.Event(), Store(settings.db_url)
    key = {"X-API-Key": create_key(store, "alice")[1]}
    with TestClient(_app(settings, store, GatedEncoder(gate))) as client:
        a, b = uploaded(client, key, answers()), uploaded(client, key, answers("indeed"))
        ana = client.post("/v1/diff-models", headers=key, json={"upload_a": a, "upload_b": b}).json()["id"]
        assert client.get(f"/v1/diff-models/{ana}", headers=key).status_code == 409  # no result yet
        assert client.delete(f"/v1/uploads/{b}", headers=key).status_code == 409  # read by a running analysis
        r = client.post(f"/v1/analyses/{ana}/cancel", headers=key)
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
        gate.set()
        time.sleep(0.5)
        assert client.get(f"/v1/analyses/{ana}", headers=key).json()["status"] == "cancelled"
        assert not (settings.analyses_dir / ana).exists()


def test_an_analysis_made_before_judging_over_splits_still_opens(client, key, settings) -> None:
    """hypotheses.json format 1 (one half-split: `replication`, `held_out`, `replicated`) and its parquet
    without the judged columns: the view and the page answer, the judged fields null, nothing refused."""
    import json

    import pyarrow.parquet as pq

    word = planted_word()
    a = uploaded(client, key, answers(), "base.jsonl")
    b = uploaded(client, key, answers(word), "tuned.jsonl")
    ana = finished(client, key, {"upload_a": a, "upload_b": b})
    (doc_path,) = (settings.analyses_dir / ana).rglob("hypotheses.json")
    doc = json.loads(doc_path.read_text())
    doc["format_version"] = 1
    doc["replication"] = {"formed_total": 1, "replicated_total": 1}
    del doc["confirmation"]
    for h in doc["hypotheses"]:
        h["held_out"], h["replicated"] = h.pop("heldout"), h.pop("confirmed")
    doc_path.write_text(json.dumps(doc))
    table_path = doc_path.with_name("diff_models.parquet")
    table = pq.read_table(table_path)
    old = table.drop_columns(["heldout_delta", "heldout_low", "heldout_high", "q_value"]).rename_columns(
        [c if c != "confirmed" else "replicated" for c in table.drop_columns(
            ["heldout_delta", "heldout_low", "heldout_high", "q_value"]).column_names]
    )  # fmt: skip
    pq.write_table(old, table_path)
    page = client.get(f"/v1/diff-models/{ana}", headers=key)
    assert page.status_code == 200, page.text
    assert page.json()["confirmation"] is None and all(item["confirmed"] is None for item in page.json()["items"])
    view = client.get(f"/v1/diff-models/{ana}/view", headers=key)
    assert view.status_code == 200, view.text
    assert view.json()["confirmation"] is None and view.json()["concepts"]["confirmed"][0] is None
