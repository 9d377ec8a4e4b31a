"""Themes and descriptions over the REST API: the analysis describes its concepts; tenant isolation holds."""

from __future__ import annotations

from tests.serve.conftest import wait_for
from tests.serve.test_api import upload


def test_themes_route_and_described_concept_detail(client, key, other_key) -> None:
    up = upload(client, key).json()
    r = client.post("/v1/analyses", headers=key, json={"upload_ids": [up["id"]], "metrics": {"min_rows": 2}})
    aid = wait_for(client, key, r.json()["id"])["id"]
    themes = client.get(f"/v1/analyses/{aid}/themes", headers=key)
    assert themes.status_code == 200, themes.text
    body = themes.json()
    assert body["format_version"] == 1 and body["summary"]["n_concepts"] > 0
    assert body["summary"]["token_detail"]["available"] is False  # the service does not re-read rows
    worst = client.get(f"/v1/analyses/{aid}/summary", headers=key).json()["rankings"]["worst_model"][0]["concept_id"]
    detail = client.get(f"/v1/analyses/{aid}/concepts/{worst}", headers=key).json()
    readable = detail["readable"]
    assert readable["concept_id"] == worst and readable["description"] and readable["examples"]
    assert "worst_X_model" in readable["reasons"]
    # the concept table carries the sentence (the explorer shows it before the label) and searches it
    table = client.get(f"/v1/analyses/{aid}/concepts", headers=key, params={"limit": 1000}).json()["items"]
    by_id = {c["concept_id"]: c for c in table}
    assert by_id[worst]["description"] == readable["description"]
    word = readable["description"].split()[1]
    found = client.get(f"/v1/analyses/{aid}/concepts", headers=key, params={"q": word, "limit": 1000}).json()
    assert worst in {c["concept_id"] for c in found["items"]}
    # a concept that was not described has no readable part
    described = {c for t in body["themes"] for c in (m["concept_id"] for m in t["concepts"])} | set(body["unthemed"])
    other = next(c for c in range(64) if c not in described)
    assert client.get(f"/v1/analyses/{aid}/concepts/{other}", headers=key).json()["readable"] is None
    # another key sees nothing
    assert client.get(f"/v1/analyses/{aid}/themes", headers=other_key).status_code == 404
    assert client.get("/v1/analyses/ana_nope/themes", headers=key).status_code == 404
