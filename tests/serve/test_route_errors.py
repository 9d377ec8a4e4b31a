"""Every router declares its error statuses through one helper, with the one error body."""

from __future__ import annotations

from cg_ray.serve.errors import ErrorBody
from cg_ray.serve.routes import error_responses


def test_statuses_and_descriptions_share_the_error_body() -> None:
    out = error_responses(404, 413, s409="the analysis has not succeeded")
    assert list(out) == [404, 409, 413]
    assert all(v["model"] is ErrorBody for v in out.values())
    assert out[409]["description"] == "the analysis has not succeeded" and "description" not in out[404]


def test_the_openapi_document_names_the_described_conflict() -> None:
    from fastapi import FastAPI

    from cg_ray.serve.routes import diff_models

    app = FastAPI()
    app.include_router(diff_models.router)
    op = app.openapi()["paths"]["/v1/diff-models/{analysis_id}"]["get"]["responses"]
    assert op["409"]["description"] == "the analysis has not succeeded" and "413" in op
