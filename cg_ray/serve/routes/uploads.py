"""Uploads: benchmark rows (a file or a JSON body) and arena battles, stored per API key.

Parsing, validating and writing an upload is CPU and disk work: it runs in the threadpool
(`run_in_threadpool`), never on the ingress' event loop, so status reads and /v1/score stay quick while
large uploads are parsed (the load-and-fault run once saw a 7 s status read behind upload parsing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import pyarrow.parquet as pq
from fastapi import APIRouter, File, Form, UploadFile
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from cg_ray.artifacts.publish import atomic_file
from cg_ray.benchmarks.sources import FieldMapping
from cg_ray.serve.api_types import Deleted, JsonUpload, UploadView
from cg_ray.serve.db import Upload, new_id
from cg_ray.serve.deps import Owner, Service, ServiceDep
from cg_ray.serve.errors import api_error, upload_error
from cg_ray.serve.inspect_uploads import InspectOptions
from cg_ray.serve.lifecycle import check_quota, delete_upload
from cg_ray.serve.routes import error_responses
from cg_ray.serve.uploads import ParsedUpload, UploadError, check_name, mapping_record, parse_file, parse_rows

router = APIRouter(prefix="/v1", tags=["uploads"], responses=error_responses(422))


def record_upload(
    service: Service,
    path: Path,
    *,
    upload_id: str,
    owner: str,
    name: str,
    n_rows: int,
    benchmarks: list[str],
    fields: dict[str, Any],
    has_scores: bool,
) -> UploadView:
    """The metadata row of an upload whose file is already at `path`; the file goes if the row cannot be added."""
    try:
        with service.store.session() as s:
            row = Upload(
                id=upload_id,
                owner=owner,
                name=name,
                n_rows=n_rows,
                benchmarks=benchmarks,
                fields=fields,
                has_scores=has_scores,
                path=str(path),
            )
            s.add(row)
    except Exception:
        path.unlink(missing_ok=True)  # no orphan file without its metadata row
        raise
    return UploadView.model_validate(row)


def store_rows(service: Service, owner: str, name: str, parsed: ParsedUpload) -> UploadView:
    upload_id = new_id("upl")
    path = service.settings.uploads_dir / f"{upload_id}.parquet"
    with atomic_file(path) as tmp:
        pq.write_table(parsed.table, tmp)
        check_quota(service, owner, tmp.stat().st_size)  # over the quota: the temporary file goes, nothing stored
    return record_upload(
        service,
        path,
        upload_id=upload_id,
        owner=owner,
        name=name,
        n_rows=parsed.table.num_rows,
        benchmarks=parsed.benchmarks,
        fields={
            "detected": parsed.detected_fields,
            "mapping": mapping_record(parsed.mapping),
            **({"notes": parsed.notes} if parsed.notes else {}),  # e.g. nested metadata kept but not analysed
            **({"source": parsed.source} if parsed.source else {}),  # an inspect_ai log: how it was read
        },
        has_scores=parsed.has_scores,
    )


async def read_limited(service: Service, file: UploadFile) -> bytes:
    """The upload's bytes, or 413 past the size limit (one byte more is read to tell)."""
    limit = service.settings.limits.max_upload_bytes
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise api_error(413, f"upload is over the {limit:,}-byte limit")
    return data


@router.post("/uploads", status_code=201, response_model=UploadView)
async def upload_file(
    service: ServiceDep,
    owner: Owner,
    file: Annotated[
        UploadFile,
        File(
            description="JSONL, CSV or Parquet; the product's own rows.parquet and its exports as they are; "
            "an inspect_ai log (.eval, or a .json log): one row per sample and epoch"
        ),
    ],
    benchmark: Annotated[str | None, Form()] = None,
    mapping: Annotated[
        str | None,
        Form(
            description="JSON object {id, benchmark, prompt, response, reference, score}: which field holds each part"
        ),
    ] = None,
    scorer_name: Annotated[
        str | None,
        Form(description="inspect_ai logs: the scorer whose value is the score (default: the log's only one)"),
    ] = None,
    missing_score: Annotated[
        Literal["error", "skip"] | None,
        Form(description="inspect_ai logs: a sample without that score refuses the upload (error) or is skipped"),
    ] = None,
) -> UploadView:
    try:
        field_mapping = FieldMapping.model_validate_json(mapping) if mapping else None
    except ValidationError as exc:
        raise api_error(422, f"invalid mapping: {exc.errors()[0]['msg']}", field="mapping") from None
    name = file.filename or "upload"
    limits = service.settings.limits
    try:
        check_name(name, limits, "file")
        if benchmark is not None:
            check_name(benchmark, limits, "benchmark")
    except UploadError as exc:
        raise upload_error(exc) from None
    await run_in_threadpool(check_quota, service, owner, 0)
    data = await read_limited(service, file)
    try:
        parsed = await run_in_threadpool(
            lambda: parse_file(
                data,
                name,
                file.content_type,
                field_mapping,
                benchmark or Path(name).stem,
                limits,
                inspect=InspectOptions(scorer_name, missing_score, benchmark),
            )
        )
    except UploadError as exc:
        raise upload_error(exc) from None
    return await run_in_threadpool(store_rows, service, owner, name, parsed)


@router.post("/uploads/json", status_code=201, response_model=UploadView)
def upload_json(service: ServiceDep, owner: Owner, body: JsonUpload) -> UploadView:
    check_quota(service, owner, 0)
    try:
        check_name(body.name, service.settings.limits, "name")
        parsed = parse_rows(body.rows, body.mapping, body.name, service.settings.limits)
    except UploadError as exc:
        raise upload_error(exc) from None
    return store_rows(service, owner, body.name, parsed)


@router.post("/battles", status_code=201, response_model=UploadView)
async def upload_battles(
    service: ServiceDep,
    owner: Owner,
    file: Annotated[UploadFile, File(description="battles in the LMSYS layout: JSONL or Parquet")],
) -> UploadView:
    from cg_ray.serve.battles import validate_battles

    await run_in_threadpool(check_quota, service, owner, 0)
    data = await read_limited(service, file)
    await run_in_threadpool(check_quota, service, owner, len(data))
    upload_id = new_id("upl")
    try:
        path, summary = await run_in_threadpool(
            validate_battles,
            data,
            file.filename or "battles.jsonl",
            service.settings.uploads_dir,
            upload_id,
            service.settings.limits,
        )
    except UploadError as exc:
        raise upload_error(exc) from None
    return await run_in_threadpool(
        lambda: record_upload(
            service,
            path,
            upload_id=upload_id,
            owner=owner,
            name=file.filename or "battles",
            n_rows=summary["n_battles"],
            benchmarks=summary["models"],
            fields={"kind": "battles", **summary},
            has_scores=True,
        )
    )


@router.get("/uploads", response_model=list[UploadView])
def list_uploads(service: ServiceDep, owner: Owner) -> list[UploadView]:
    return [UploadView.model_validate(u) for u in service.store.list_owned(Upload, owner)]


@router.get("/uploads/{upload_id}", response_model=UploadView)
def get_upload(service: ServiceDep, owner: Owner, upload_id: str) -> UploadView:
    return UploadView.model_validate(service.owned(Upload, owner, upload_id))


@router.delete("/uploads/{upload_id}", response_model=Deleted, responses=error_responses(409))
def remove_upload(service: ServiceDep, owner: Owner, upload_id: str) -> Deleted:
    """Delete the upload's file and record (refused while a running analysis reads it)."""
    delete_upload(service, owner, upload_id)
    return Deleted(id=upload_id)
