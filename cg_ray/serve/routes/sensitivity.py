"""Whether an analysis' findings hold under other readers (`cg-ray sensitivity`, issue #51): started, then
followed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.concurrency import run_in_threadpool

from cg_ray.serve import sensitivities
from cg_ray.serve.db import Analysis
from cg_ray.serve.deps import FinishedRun, Owner, Service, ServiceDep
from cg_ray.serve.errors import api_error
from cg_ray.serve.routes import error_responses
from cg_ray.serve.sensitivity_types import SensitivityRequest, SensitivityStatus

router = APIRouter(
    prefix="/v1/analyses/{analysis_id}",
    tags=["sensitivity"],
    responses=error_responses(404, s409="the analysis has not succeeded, or a sensitivity of it is running"),
)
REQUEST = Body(
    description="`readers`: other readers (shipped names among the service's sensitivity.readers; default: every "
    "one it allows but the run's own); `fresh`: re-read even the readers already read",
    examples=[{"readers": ["l20-seed7"]}],
)


def _job(service: Service, analysis_id: str) -> Path:
    return service.settings.analyses_dir / analysis_id / sensitivities.JOB_DIR


def check_running(service: Service, owner: str) -> None:
    """429 when the key's sensitivities running are as many as the analyses it may run at once."""
    limit = service.settings.limits.max_concurrent_analyses
    running = sum(
        1
        for a in service.store.list_owned(Analysis, owner)
        if sensitivities.status(_job(service, a.id)) in ("pending", "running")
    )
    if running >= limit:
        raise api_error(429, f"{running} sensitivities already running for this key (of {limit}); wait for one")


@router.post("/sensitivity", status_code=202, response_model=SensitivityStatus, responses=error_responses(422, 429))
async def start_sensitivity(
    service: ServiceDep,
    owner: Owner,
    analysis_id: str,
    run: FinishedRun,
    body: Annotated[SensitivityRequest | None, REQUEST] = None,
) -> SensitivityStatus:
    """Re-read the analysis' rows with other readers (SAEs) in the background, judge them with the run's
    settings and seeds, and mark each confirmed finding found / partly / not found under each (the same rows:
    robustness to the reader, not replication); follow it with GET. A reader the service does not allow (its
    `sensitivity.readers`) or the run's own is a 422 naming `readers`, nothing started; a run over
    `sensitivity.max_rows` rows is refused. The readers an earlier sensitivity read are kept unless `fresh`; a
    finished one replaces the run's earlier sensitivity/."""
    body = body or SensitivityRequest()
    settings = service.settings.sensitivity
    own = await run_in_threadpool(sensitivities.own_reader, run, settings)
    readers = sensitivities.check_readers(body.readers, own, settings)
    config = await run_in_threadpool(sensitivities.plan, run, readers, body.fresh, settings)
    await run_in_threadpool(check_running, service, owner)
    job = _job(service, analysis_id)
    await run_in_threadpool(sensitivities.start, job, run, config)
    found = await run_in_threadpool(sensitivities.report, job, run)
    return SensitivityStatus.model_validate(found)


@router.get("/sensitivity", response_model=SensitivityStatus)
def get_sensitivity(service: ServiceDep, analysis_id: str, run: FinishedRun) -> SensitivityStatus:
    """Its status and last lines, why it failed, and the run's sensitivity/: per reader its counts, per reader
    pair the latents shared and rank correlations, per confirmed finding its status under each reader with
    the overlap (Jaccard, rows covered) and its held-out effect [interval], in words."""
    found = sensitivities.report(_job(service, analysis_id), run)
    if found is None:
        raise api_error(
            404,
            f"analysis {analysis_id!r} has no sensitivity: POST /v1/analyses/{analysis_id}/sensitivity starts one",
        )
    return SensitivityStatus.model_validate(found)
