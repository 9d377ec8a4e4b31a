"""Analyses: created from the caller's uploads, run in the service (small) or as Ray jobs (large, generate,
arena); their status is followed here."""

from __future__ import annotations

import asyncio

import pyarrow.parquet as pq
from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from cg_ray.serve.api_types import AnalysisRequest, AnalysisView, Deleted
from cg_ray.serve.db import ACTIVE_STATUSES, Analysis, Upload, new_id
from cg_ray.serve.deps import Owner, Service, ServiceDep
from cg_ray.serve.errors import api_error
from cg_ray.serve.lifecycle import cancel_analysis, delete_analysis
from cg_ray.serve.routes import error_responses

router = APIRouter(prefix="/v1", tags=["analyses"], responses=error_responses(404))


def check_bounds(service: Service, owner: str, body: AnalysisRequest) -> list[Upload]:
    """The request's uploads, once its client-controlled sizes are within the limits (else 404 / 413 / 422)."""
    limits = service.settings.limits
    if len(body.upload_ids) > limits.max_uploads_per_analysis:
        raise api_error(
            413, f"{len(body.upload_ids)} uploads, over the {limits.max_uploads_per_analysis} limit", field="upload_ids"
        )
    if len(set(body.upload_ids)) != len(body.upload_ids):
        twice = next(u for u in body.upload_ids if body.upload_ids.count(u) > 1)
        raise api_error(422, f"upload {twice[:100]!r} is named twice", field="upload_ids")
    if body.model is not None and len(body.model) > limits.max_name_chars:
        raise api_error(413, f"model name over the {limits.max_name_chars}-character limit", field="model")
    uploads = [service.owned(Upload, owner, upload_id) for upload_id in body.upload_ids]
    benchmarks = {b for u in uploads if u.fields.get("kind") != "battles" for b in u.benchmarks}
    if len(benchmarks) > limits.max_benchmarks:
        raise api_error(
            413,
            f"{len(benchmarks):,} distinct benchmarks, over the {limits.max_benchmarks:,} limit",
            field="upload_ids",
        )
    if body.mode == "precomputed" and body.text == "response":
        for upload in uploads:
            if upload.fields.get("kind") != "battles" and not has_responses(upload):
                raise api_error(422, f"upload {upload.id!r} has no responses to read", field="text")
    return uploads


def has_responses(upload: Upload) -> bool:
    column = pq.read_table(upload.path, columns=["response"]).column("response")
    return bool(column.null_count < len(column))


def check_request(service: Service, owner: str, body: AnalysisRequest) -> list[Upload]:
    """The request's uploads, once the request is known to be runnable (else 404 / 413 / 422 / 429)."""
    uploads = check_bounds(service, owner, body)
    battles = [u for u in uploads if u.fields.get("kind") == "battles"]
    if body.mode == "arena" and (len(uploads) != 1 or not battles):
        raise api_error(422, "mode 'arena' takes exactly one battles upload (POST /v1/battles)", field="mode")
    if body.mode != "arena" and battles:
        raise api_error(422, f"upload {battles[0].id!r} holds battles: use mode 'arena'", field="mode")
    if body.scorer is not None:
        from cg_ray.scoring import SCORERS

        try:
            SCORERS.check(body.scorer)
        except Exception as exc:
            raise api_error(422, f"invalid scorer: {exc}", field="scorer") from None
    check_running(service, owner)
    return uploads


def check_running(service: Service, owner: str) -> None:
    """429 when the key already runs as many analyses as it may."""
    active = [a for a in service.store.list_owned(Analysis, owner) if a.status in ACTIVE_STATUSES]
    if len(active) >= service.settings.limits.max_concurrent_analyses:
        raise api_error(429, f"{len(active)} analyses already running for this key; wait for one to finish")


@router.post("/analyses", status_code=202, response_model=AnalysisView)
async def create_analysis(service: ServiceDep, owner: Owner, body: AnalysisRequest) -> AnalysisView:
    uploads = await run_in_threadpool(check_request, service, owner, body)  # database and file reads: off the loop
    as_job = body.mode in ("generate", "arena") or sum(u.n_rows for u in uploads) > service.settings.small_analysis_rows
    analysis_id = new_id("ana")
    with service.store.session() as s:
        row = Analysis(
            id=analysis_id,
            owner=owner,
            upload_ids=body.upload_ids,
            mode=body.mode,
            options=body.model_dump(mode="json", exclude={"upload_ids", "mode"}),
        )
        s.add(row)
    if as_job:
        from cg_ray.serve.jobs import submit

        try:
            await asyncio.to_thread(submit, service.settings, service.store, analysis_id)
        except Exception as exc:  # no cluster to submit to: the analysis fails visibly, not the service
            service.store.update_analysis(analysis_id, status="failed", error=f"cannot submit the Ray job: {exc}")
        return AnalysisView.model_validate(service.owned(Analysis, owner, analysis_id))
    service.start_analysis(analysis_id)
    return AnalysisView.model_validate(row)


@router.get("/analyses", response_model=list[AnalysisView])
def list_analyses(service: ServiceDep, owner: Owner) -> list[AnalysisView]:
    return [AnalysisView.model_validate(a) for a in service.store.list_owned(Analysis, owner)]


@router.get("/analyses/{analysis_id}", response_model=AnalysisView)
def get_analysis(service: ServiceDep, owner: Owner, analysis_id: str) -> AnalysisView:
    return AnalysisView.model_validate(service.current(owner, analysis_id))


@router.post("/analyses/{analysis_id}/cancel", response_model=AnalysisView, responses=error_responses(409))
async def cancel(service: ServiceDep, owner: Owner, analysis_id: str) -> AnalysisView:
    """Stop a queued or running analysis (its task, or its Ray job); it is marked `cancelled`, never re-run."""
    return AnalysisView.model_validate(await cancel_analysis(service, owner, analysis_id))


@router.delete("/analyses/{analysis_id}", response_model=Deleted)
async def delete(service: ServiceDep, owner: Owner, analysis_id: str) -> Deleted:
    """Cancel the analysis if it runs, remove its artifacts; it answers 404 from then on."""
    await delete_analysis(service, owner, analysis_id)
    return Deleted(id=analysis_id)
