"""A probe of an analysis' gaps on new items (`cg-ray probe`, docs/probe.md): started, then followed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.concurrency import run_in_threadpool

from cg_ray.serve import augments, probes
from cg_ray.serve.api_types import ProbeStatus
from cg_ray.serve.db import Analysis
from cg_ray.serve.deps import FinishedRun, Owner, Service, ServiceDep
from cg_ray.serve.errors import api_error
from cg_ray.serve.routes import error_responses

router = APIRouter(
    prefix="/v1/analyses/{analysis_id}",
    tags=["probe"],
    responses=error_responses(404, s409="the analysis has not succeeded, or a probe of it is running"),
)
SETTINGS = Body(
    description="probe settings (cg_ray.probe.config.ProbeConfig, less `reader` and `reader_factory`): gaps, "
    "top, pairs, seed, fdr, writer, families, reference_check, reader_check, near_copy, model; endpoints and "
    "`api_key_env` names only from the service's `probe:` settings, never a key",
    examples=[{"gaps": ["mode:1"], "pairs": 40}],
)


def _job(service: Service, analysis_id: str) -> Path:
    return service.settings.analyses_dir / analysis_id / probes.JOB_DIR


# The jobs a key runs on the probe's machinery, each a Ray job or a process as heavy as an analysis: by the
# folder each keeps in its analysis' folder, and what it is called.
JOBS = {probes.JOB_DIR: "probe", augments.JOB_DIR: "augment"}


def check_running_jobs(service: Service, owner: str) -> None:
    """429 when the key's probes and augments already running are as many as the analyses it may run at once
    (each is a Ray job or a process, as heavy as an analysis)."""
    running: Counter[str] = Counter(
        what
        for a in service.store.list_owned(Analysis, owner)
        for folder, what in JOBS.items()
        if probes.status(service.settings.analyses_dir / a.id / folder) in ("pending", "running")
    )
    limit = service.settings.limits.max_concurrent_analyses
    if sum(running.values()) >= limit:
        said = ", ".join(f"{n} {what}{'s' if n > 1 else ''}" for what, n in sorted(running.items(), reverse=True))
        raise api_error(429, f"{said} already running for this key (of {limit}); wait for one to finish")


@router.post("/probe", status_code=202, response_model=ProbeStatus, responses=error_responses(422, 429))
async def start_probe(
    service: ServiceDep,
    owner: Owner,
    analysis_id: str,
    run: FinishedRun,
    body: Annotated[dict[str, Any], SETTINGS],
    fresh: bool = False,
) -> ProbeStatus:
    """Start a probe of the analysis' gaps as a Ray job (or a process: the service's `probe.runner`); follow it
    with GET. A probe that did not
    finish resumes with the same settings, unless `fresh`. A finished probe replaces the run's earlier one."""
    config = probes.probe_config(body, service.settings.probe)
    await run_in_threadpool(probes.check_gaps, run.path, config)
    await run_in_threadpool(check_running_jobs, service, owner)
    job = _job(service, analysis_id)
    await run_in_threadpool(probes.start, job, run.path, config, fresh, service.settings)
    return ProbeStatus.model_validate(probes.report(job, run))


@router.get("/probe", response_model=ProbeStatus)
def get_probe(service: ServiceDep, analysis_id: str, run: FinishedRun) -> ProbeStatus:
    """The probe's status, its last lines of progress, why it failed, and once done its results per gap."""
    found = probes.report(_job(service, analysis_id), run)
    if found is None:
        raise api_error(404, f"analysis {analysis_id!r} has no probe: POST /v1/analyses/{analysis_id}/probe starts one")
    return ProbeStatus.model_validate(found)
