"""One FastAPI router per resource; `cg_ray.serve.api.create_api` includes them all."""

from __future__ import annotations

from typing import Any

from cg_ray.serve.errors import ErrorBody


def error_responses(*statuses: int, **descriptions: str) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a router or route: every status answers with the one error body. A description
    goes by keyword `s<status>` (`s409="the analysis has not succeeded"`)."""
    out: dict[int | str, dict[str, Any]] = {status: {"model": ErrorBody} for status in statuses}
    for key, text in descriptions.items():
        out[int(key.removeprefix("s"))] = {"model": ErrorBody, "description": text}
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))
