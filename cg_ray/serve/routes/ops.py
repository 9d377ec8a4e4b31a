"""Liveness and readiness probes (no API key): ready when the database answers and, under Ray, the cluster
has room for an analysis beside the service's replicas."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from cg_ray.serve.analyses import RayTasks
from cg_ray.serve.api_types import Health, Readiness
from cg_ray.serve.deps import ServiceDep

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
    # Under Ray, analyses also need a CPU beside the replicas: a cluster that cannot fit one analysis' task
    # (too small, or shrunk since start) would leave every analysis waiting, so the service is not ready.
    reason = service.offload.unschedulable() if isinstance(service.offload, RayTasks) else None
    if reason is not None:
        body = Readiness(status="not ready", d_sae=service.encoder.d_sae, error=reason).model_dump(exclude_none=True)
        return JSONResponse(body, status_code=503)
    return Readiness(status="ready", d_sae=service.encoder.d_sae)
