"""The API's contract as /docs shows it: a response schema on every route, one error body shape."""

from __future__ import annotations


def test_every_route_documents_its_response(client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path, methods in paths.items():
        for method, op in methods.items():
            ok = next(code for code in op["responses"] if code.startswith("2"))
            content = op["responses"][ok].get("content", {})
            if path.endswith("/artifacts/{name}"):
                continue  # a file download
            assert content.get("application/json", {}).get("schema"), f"{method.upper()} {path}"


def test_errors_share_one_shape(client, key) -> None:
    shapes = [
        client.get("/v1/uploads"),  # 401 from the key dependency
        client.get("/v1/analyses/ana_nope", headers=key),  # 404 from a route
        client.post("/v1/analyses", headers=key, json={"upload_ids": []}),  # 422 from request validation
        client.post("/v1/score", headers=key, json={"texts": ["ok", " "]}),  # 422 from a check
        client.post("/v1/diff-models", headers=key, json={"top": 3}),  # 422 from a diff-models check
        client.get("/v1/diff-models/ana_nope", headers=key),  # 404 from its result route
    ]
    for r in shapes:
        assert r.status_code >= 400
        assert set(r.json()) == {"detail"} and set(r.json()["detail"]) == {"error", "line", "field", "request_id"}, (
            r.json()
        )
        assert r.json()["detail"]["request_id"] == r.headers["X-Request-ID"]
    assert shapes[2].json()["detail"]["field"] == "upload_ids"
    assert shapes[3].json()["detail"]["field"] == "texts.1"
    assert shapes[4].json()["detail"]["field"] == "upload_id"
