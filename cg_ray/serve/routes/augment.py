"""An augment of an analysis' benchmark (`cg-ray augment`, docs/augment.md): started, then followed. It runs
as the probe does (cg_ray.serve.probes), so this router mirrors routes/probe.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.concurrency import run_in_threadpool

from cg_ray.serve import augments, probes
from cg_ray.serve.augment_types import AugmentStatus
from cg_ray.serve.deps import FinishedRun, Owner, Service, ServiceDep
from cg_ray.serve.errors import api_error
from cg_ray.serve.routes import error_responses
from cg_ray.serve.routes.probe import check_running_jobs

router = APIRouter(
    prefix="/v1/analyses/{analysis_id}",
    tags=["augment"],
    responses=error_responses(
        404, s409="the analysis has not succeeded, has no scope yet, or an augment of it is running"
    ),
)
SETTINGS = Body(
    description="augment settings (cg_ray.augment.config.AugmentConfig, less `reader` and `reader_factory`): "
    "benchmark, reference, gaps (concept:ID, in-scope gaps of the run's scope), top, items, seed, writer "
    "({endpoint, model, api_key_env}: the endpoint under the service's probe.endpoints, the key variable one of "
    "its probe.key_envs, never a key), reference_check, reader_check, near_copy, overdraw, shown_rows; and "
    "`fresh` (as the query's)",
    examples=[{"benchmark": "narrow", "items": 20, "writer": {"endpoint": "http://llm:8000/v1", "model": "writer"}}],
)


def _job(service: Service, analysis_id: str) -> Path:
    return service.settings.analyses_dir / analysis_id / augments.JOB_DIR


@router.post("/augment", status_code=202, response_model=AugmentStatus, responses=error_responses(422, 429))
async def start_augment(
    service: ServiceDep,
    owner: Owner,
    analysis_id: str,
    run: FinishedRun,
    body: Annotated[dict[str, Any], SETTINGS],
    fresh: bool = False,
) -> AugmentStatus:
    """Start an augment of one of the analysis' scoped benchmarks as a Ray job (or a process: the service's
    `probe.runner`); follow it with GET. The run needs a scope (POST …/scope first: 409 until then); the
    settings, the writer's endpoint and key variable, the benchmark and the gaps are checked before it starts
    (422 naming the field, nothing written). An augment that did not finish resumes with the same settings,
    unless `fresh`. A finished augment replaces the run's earlier one (RUN/augment/)."""
    settings = dict(body)
    fresh_in_body = settings.pop("fresh", False)
    if not isinstance(fresh_in_body, bool):
        raise api_error(422, "augment setting fresh: Input should be a valid boolean", field="fresh")
    config = augments.augment_config(settings, service.settings.probe)
    await run_in_threadpool(augments.check_plan, run.path, analysis_id, config)
    await run_in_threadpool(check_running_jobs, service, owner)
    job = _job(service, analysis_id)
    command = augments.COMMAND
    await run_in_threadpool(probes.start, job, run.path, config, fresh or fresh_in_body, service.settings, command)
    return AugmentStatus.model_validate(augments.report(job, run))


@router.get("/augment", response_model=AugmentStatus)
def get_augment(service: ServiceDep, analysis_id: str, run: FinishedRun) -> AugmentStatus:
    """The augment's status, its last lines of progress, why it failed, and once done its summary: the
    benchmark's in-scope coverage before → after, each gap's state before → after, what the checks kept and
    dropped."""
    found = augments.report(_job(service, analysis_id), run)
    if found is None:
        raise api_error(
            404, f"analysis {analysis_id!r} has no augment: POST /v1/analyses/{analysis_id}/augment starts one"
        )
    return AugmentStatus.model_validate(found)
