"""Large or `generate` analyses run as Ray jobs: the service writes a run configuration for `cg-ray run`
and submits it with Ray's JobSubmissionClient; the status route follows the job.

Inputs are the service's own stored uploads (one Parquet per benchmark); nothing a client sends is used as
a path. The job writes its run directory into the analysis' folder, which the result routes then read.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from cg_ray.arena.config import ArenaConfig, SelectionConfig
from cg_ray.arena.job import ArenaJobConfig
from cg_ray.benchmarks.sources import FieldMapping, LocalSource
from cg_ray.config import MetricsConfig, canonical_text_mode
from cg_ray.pipeline.config import ReaderStageConfig, RunConfig
from cg_ray.serve.db import Analysis, Store, Upload
from cg_ray.serve.settings import ServiceSettings

log = logging.getLogger(__name__)

RUN_NAME = "run"
JOB_STATUS = {
    "PENDING": "queued",
    "RUNNING": "running",
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "STOPPED": "failed",
}


def job_config(settings: ServiceSettings, analysis: Analysis, uploads: list[Upload], work: Path) -> RunConfig:
    """The `cg-ray run` configuration of an analysis (inputs split per benchmark under `work/inputs`)."""
    (work / "inputs").mkdir(parents=True, exist_ok=True)
    table = pa.concat_tables(pq.read_table(u.path) for u in uploads)
    generate = analysis.mode == "generate"
    sources = []
    for i, bench in enumerate(sorted(set(table["benchmark"].to_pylist()))):
        part = table.filter(pc.equal(table["benchmark"], bench))
        path = work / "inputs" / f"{i:03d}.parquet"
        pq.write_table(part, path)
        has_reference = part["reference"].null_count < part.num_rows
        fields = FieldMapping(
            id="row_id",
            prompt="prompt",
            reference="reference" if has_reference else None,
            score=None if generate else "score",
            response=None if generate else "response",
        )
        scorer = analysis.options.get("scorer") or ("exact" if generate else "precomputed")
        sources.append(LocalSource(kind="local", path=str(path), benchmark=bench, fields=fields, scorer=scorer))
    return RunConfig(
        name=RUN_NAME,
        output_dir=str(work),
        benchmarks=sources,
        generation=settings.generation,
        reader=ReaderStageConfig.extending(
            settings.reader,
            text=canonical_text_mode(analysis.options.get("text", "prompt"), warn=False),  # stored before the rename
        ),
        metrics=MetricsConfig.model_validate(analysis.options.get("metrics", {})),
        explain=settings.explain,
    )


def arena_job_config(settings: ServiceSettings, analysis: Analysis, battles: Upload, work: Path) -> ArenaJobConfig:
    """The `cg-ray arena` configuration of an arena analysis over a stored battles upload."""
    options = analysis.options
    selection = (
        SelectionConfig(models=tuple(options["models"]))
        if options.get("models")
        else SelectionConfig(min_battles=options.get("min_battles") or 1)
    )
    return ArenaJobConfig(
        name=RUN_NAME,
        output_dir=str(work),
        arena=ArenaConfig(battles=battles.path, selection=selection),
        reader=ReaderStageConfig.extending(settings.reader, text="prompt_response"),
        metrics=MetricsConfig.model_validate(options.get("metrics", {})),
        max_battles_per_model=options.get("max_battles_per_model") or None,
    )


def job_client(address: str | None, attempts: int = 10) -> Any:
    """A job client for the dashboard at `address` (None: the cluster Ray finds, as `ray job submit` does); the
    dashboard may still be starting (a fresh cluster), so connecting is retried briefly."""
    import time

    from ray.job_submission import JobSubmissionClient

    for attempt in range(attempts):
        try:
            return JobSubmissionClient(address)
        except (ConnectionError, RuntimeError) as exc:
            if attempt == attempts - 1:
                raise
            log.info("Ray dashboard not reachable yet (%s); retrying", exc)
            time.sleep(1.0)
    raise AssertionError("unreachable")


NO_AGENT = "No available agent to submit job"


def submit_job(client: Any, *, entrypoint: str, submission_id: str, wait_s: float = 60.0) -> str:
    """`client.submit_job`, waiting up to `wait_s` for the node's job agent: on a cluster that has just started,
    the dashboard answers before its agent registers and refuses with "No available agent to submit job"
    (nothing is created then, so the same submission id is sent again)."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return str(client.submit_job(entrypoint=entrypoint, submission_id=submission_id))
        except RuntimeError as exc:
            if NO_AGENT not in str(exc) or time.monotonic() >= deadline:
                raise
            log.info("Ray's job agent is not up yet; submitting %s again in 2 s", submission_id)
            time.sleep(2.0)


def ray_job_state(client: Any, job_id: str) -> str:
    """PENDING | RUNNING | SUCCEEDED | FAILED | STOPPED (the keys of JOB_STATUS)."""
    return str(client.get_job_status(job_id)).rsplit(".", 1)[-1]


def last_error_line(lines: list[str]) -> str | None:
    """What a failed job's log says last about its error: the last line naming one, else its last line."""
    errors = [line for line in lines if "error" in line.lower()]
    found = errors or lines
    return found[-1] if found else None


SUBMIT_LEASE_S = 300.0


def submit(settings: ServiceSettings, store: Store, analysis_id: str) -> str:
    """Submit the analysis as a Ray job. Until its job id is stored it holds the analysis' lease, so no
    ingress replica's lease loop takes it for an in-service analysis meanwhile."""
    import uuid

    holder = f"submit:{uuid.uuid4().hex[:12]}"
    store.claim(analysis_id, holder, SUBMIT_LEASE_S)
    try:
        return _submit(settings, store, analysis_id)
    finally:
        store.release(analysis_id, holder)


def _upload(store: Store, analysis: Analysis, upload_id: str) -> Upload:
    upload = store.get_owned(Upload, analysis.owner, upload_id)
    if upload is None:
        raise LookupError(f"upload {upload_id} of analysis {analysis.id} is gone")
    return upload


def _submit(settings: ServiceSettings, store: Store, analysis_id: str) -> str:
    analysis = store.get_owned_any(Analysis, analysis_id)
    if analysis is None:  # deleted since it was queued (the submission fails, as before, with a named cause)
        raise LookupError(f"analysis {analysis_id} is gone")
    uploads = [_upload(store, analysis, u) for u in analysis.upload_ids]
    work = (settings.analyses_dir / analysis_id).resolve()
    work.mkdir(parents=True, exist_ok=True)
    config: RunConfig | ArenaJobConfig
    if analysis.mode == "arena":
        config, command = arena_job_config(settings, analysis, uploads[0], work), "arena"
    else:
        config, command = job_config(settings, analysis, uploads, work), "run"
    config_path = work / "job.yaml"
    # Only what was set: the job file reads like a hand-written one, and defaults stay the job's own.
    data = config.model_dump(mode="json", exclude_unset=True)
    config_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    client = job_client(settings.ray_address)
    # The service's own interpreter: the cluster runs the same image, and a bare `cg-ray` may not be on PATH.
    resume = " --resume" if command == "run" else ""
    entrypoint = f"{sys.executable} -m cg_ray.cli {command} {config_path}{resume}"
    job_id = submit_job(client, entrypoint=entrypoint, submission_id=f"cg-ray-{analysis_id}")
    store.update_analysis(analysis_id, job_id=job_id, status="queued", message=f"submitted as Ray job {job_id}")
    return str(job_id)


def stop(settings: ServiceSettings, job_id: str) -> None:
    """Stop a Ray job (cancel / delete of its analysis); a job already gone is not an error."""
    try:
        job_client(settings.ray_address, attempts=2).stop_job(job_id)
    except Exception:  # the cluster may be gone: the analysis is marked either way
        log.warning("could not stop Ray job %s", job_id, exc_info=True)


def refresh(settings: ServiceSettings, store: Store, analysis: Analysis) -> None:
    """Bring a job-backed analysis' status up to date (called when a client asks for it)."""
    if not analysis.job_id or analysis.status in ("succeeded", "failed"):
        return
    client = job_client(settings.ray_address)
    status = JOB_STATUS.get(ray_job_state(client, analysis.job_id), "running")
    if status == "succeeded":
        run_dir = settings.analyses_dir.resolve() / analysis.id / RUN_NAME
        if analysis.mode == "arena":
            register_arena_models(store, analysis, run_dir)
        store.update_analysis(analysis.id, status="succeeded", progress=1.0, message="done", run_dir=str(run_dir))
    elif status == "failed":
        store.update_analysis(
            analysis.id,
            status="failed",
            message="the Ray job failed",
            error=(last_error_line(client.get_job_logs(analysis.job_id).splitlines()) or "?")[-2000:],
        )
    else:
        store.update_analysis(analysis.id, status=status, message=f"Ray job {analysis.job_id}: {status}")


def register_arena_models(store: Store, analysis: Analysis, run_dir: Path) -> None:
    """Each model's CG run of an arena analysis becomes an analysis of its own, so every result route and
    the explorer show it like any other; the arena analysis lists them."""
    from cg_ray.artifacts.layout import read_arena_summary

    models = read_arena_summary(run_dir).models
    children = {}
    with store.session() as s:
        for i, (model, folder) in enumerate(sorted(models.items())):
            child_id = f"{analysis.id}-m{i}"
            children[model] = child_id
            if s.get(Analysis, child_id) is None:
                s.add(
                    Analysis(
                        id=child_id,
                        owner=analysis.owner,
                        upload_ids=analysis.upload_ids,
                        mode="arena-model",
                        options={"model": model, "arena_analysis": analysis.id},
                        status="succeeded",
                        progress=1.0,
                        message=f"arena run of {model}",
                        run_dir=str(run_dir / "models" / folder),
                    )
                )
        parent = s.get(Analysis, analysis.id)
        if parent is not None:
            parent.options = {**parent.options, "model_analyses": children}


# ---- a probe's job files (cg_ray.serve.probes): the service writes its job files here, and only here


def read_job_file(path: Path) -> dict[str, Any] | None:
    """A JSON job file written by `write_job_file`; None when it is missing or unreadable."""
    try:
        found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found


def job_time() -> str:
    """Now, as job files record their start and end (UTC, seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_job_file(path: Path, text: str) -> None:
    """A job file replaced whole, so a replica reading it never sees half of one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@contextmanager
def job_lock(path: Path) -> Iterator[None]:
    """Held by one holder at a time on this host (an advisory flock, released when the file closes): a check
    of the job's files and the start that depends on it become one step."""
    with open(path, "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def open_job_log(path: Path) -> IO[str]:
    """A job's log, appended to line by line (what a status read shows as the job's progress)."""
    return open(path, "a", encoding="utf-8", buffering=1)
