"""Cancelling and deleting: an analysis (its local task or Ray job stopped, its artifacts removed, its row
marked) and an upload (its file and row removed); and each key's storage quota."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

from cg_ray.serve.augments import JOB_DIR as AUGMENT_JOB
from cg_ray.serve.db import ACTIVE_STATUSES, DELETED, Analysis, Upload
from cg_ray.serve.deps import Service
from cg_ray.serve.errors import api_error
from cg_ray.serve.probes import JOB_DIR as PROBE_JOB
from cg_ray.serve.probes import stop as stop_probe

log = logging.getLogger(__name__)

CANCELLED = "cancelled"


async def stop_analysis(service: Service, analysis: Analysis, status: str, message: str) -> None:
    """Mark the analysis first (so a finishing thread does not publish), then stop whatever runs it."""
    service.store.update_analysis(analysis.id, status=status, message=message)
    task = service.tasks.get(analysis.id)
    if task is not None:
        task.cancel()
    if analysis.job_id and analysis.status in ACTIVE_STATUSES:
        from cg_ray.serve.jobs import stop

        await asyncio.to_thread(stop, service.settings, analysis.job_id)
    log.info("analysis %s (owner %s): %s", analysis.id, analysis.owner, message)


async def cancel_analysis(service: Service, owner: str, analysis_id: str) -> Analysis:
    analysis = service.current(owner, analysis_id)
    if analysis.status not in ACTIVE_STATUSES:
        raise api_error(
            409, f"analysis {analysis_id!r} is {analysis.status}: only a queued or running one is cancelled"
        )
    await stop_analysis(service, analysis, CANCELLED, "cancelled by the client")
    return service.owned(Analysis, owner, analysis_id)


async def delete_analysis(service: Service, owner: str, analysis_id: str) -> None:
    """Cancel it if it runs, remove its artifacts, mark its row (and an arena analysis' per-model rows)."""
    analysis = service.owned(Analysis, owner, analysis_id)
    await stop_analysis(service, analysis, DELETED, "deleted by the client")
    folder = service.settings.analyses_dir / analysis.id
    stop_probe(folder / PROBE_JOB)  # a probe of it started over REST would write into a removed folder
    stop_probe(folder / AUGMENT_JOB)  # and so would an augment (the same job code: probes.start)
    if analysis.mode != "arena-model":  # a model of an arena analysis lives inside the arena's folder
        await asyncio.to_thread(shutil.rmtree, folder, True)
    for child in (analysis.options or {}).get("model_analyses", {}).values():
        service.store.update_analysis(child, status=DELETED, message="its arena analysis was deleted")


def delete_upload(service: Service, owner: str, upload_id: str) -> None:
    """Remove the file and the row; refused (409) while a queued or running analysis reads the upload."""
    upload = service.owned(Upload, owner, upload_id)
    users = [
        a.id
        for a in service.store.list_owned(Analysis, owner)
        if a.status in ACTIVE_STATUSES and upload_id in a.upload_ids
    ]
    if users:
        raise api_error(409, f"upload {upload_id!r} is read by running analysis {users[0]!r}: cancel it first")
    with service.store.session() as s:
        row = s.get(Upload, upload.id)
        if row is not None:
            s.delete(row)
    Path(upload.path).unlink(missing_ok=True)
    log.info("upload %s (owner %s) deleted", upload_id, owner)


def storage_used(service: Service, owner: str) -> int:
    """Bytes of the key's stored uploads."""
    total = 0
    for upload in service.store.list_owned(Upload, owner):
        try:
            total += Path(upload.path).stat().st_size
        except OSError:
            continue
    return total


def check_quota(service: Service, owner: str, adding: int) -> None:
    """413 when `adding` more bytes would take the key past its storage quota."""
    quota = service.settings.limits.max_storage_bytes
    used = storage_used(service, owner)
    if used + adding > quota:
        raise api_error(
            413,
            f"storage quota: {used:,} bytes stored + {adding:,} is over this key's {quota:,}-byte quota; "
            "delete uploads (DELETE /v1/uploads/{id})",
        )
