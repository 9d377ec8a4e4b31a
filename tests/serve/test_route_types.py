"""Types at the seams: every route handler is annotated as returning its response model (or a Response)."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.responses import Response

from cg_ray.serve.api import create_api
from cg_ray.serve.db import Store
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.settings import ServiceSettings
from cg_ray.testing.fakes import HashingReader


def typed(annotation: Any) -> bool:
    """A BaseModel or Response subclass, a list of one, or a union of those; never dict, Any or None."""
    if isinstance(annotation, type):
        return issubclass(annotation, (BaseModel, Response))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list:
        return len(args) == 1 and typed(args[0])
    if origin in (typing.Union, types.UnionType):
        return all(typed(arg) for arg in args)
    return False


def test_the_guard_refuses_untyped_returns() -> None:
    assert not typed(dict[str, Any]) and not typed(Any) and not typed(dict) and not typed(None)
    assert not typed(list[dict[str, Any]]) and not typed(BaseModel | dict)
    assert typed(BaseModel) and typed(list[BaseModel]) and typed(BaseModel | Response)


def test_every_route_returns_a_model_or_a_response(tmp_path: Path) -> None:
    settings = ServiceSettings(data_dir=tmp_path / "data")
    app = create_api(settings, Store(settings.db_url), LocalEncoder(HashingReader(d_sae=8)), labels=None)
    routes = [route for route in app.routes if isinstance(route, APIRoute)]
    assert len(routes) > 20
    untyped = []
    for route in routes:
        returns = typing.get_type_hints(route.endpoint).get("return", Any)
        if not typed(returns):
            untyped.append(f"{sorted(route.methods)} {route.path} ({route.endpoint.__qualname__}): {returns}")
    assert not untyped, "\n".join(untyped)
