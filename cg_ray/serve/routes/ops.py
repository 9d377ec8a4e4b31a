"""Liveness and readiness probes (no API key)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from cg_ray.serve.deps import ServiceDep
from cg_ray.serve.models import Health, Readiness

router = APIRouter(tags=["ops"])


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz", response_model=Readiness, response_model_exclude_none=True, responses={503: {"model": Readiness}}
)
def readyz(service: ServiceDep) -> Readiness | JSONResponse:
    try:
        with service.store.session() as s:
            s.execute(text("SELECT 1"))
    except Exception as exc:  # the database is the one dependency we can check cheaply
        body = Readiness(status="not ready", error=str(exc)).model_dump(exclude_none=True)
        return JSONResponse(body, status_code=503)
    return Readiness(status="ready", d_sae=service.encoder.d_sae)
