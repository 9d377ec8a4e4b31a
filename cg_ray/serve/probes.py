"""A probe of an analysis (`cg-ray probe`, docs/probe.md) started over REST and followed until it ends.

The probe runs `cg_ray.serve.probe_job` (`cg_ray.probe.api.probe_run`, as `cg-ray probe`) as long as it takes: it
writes items with an LLM, has a model answer them, and publishes RUN/probe/ through `RunDir.update`. By
default it is a Ray job on the service's cluster, like a large analysis (its answering step joins that
cluster); `probe.runner: process` runs it as a process of the replica's host with a private Ray. Its state
lives in files of the analysis' folder (probe.job/), not in the replica that started it, so any replica
answers for it: the settings, the start (its Ray job or process), the log (the probe's lines per gap, the
progress a client reads), the error log and the outcome (its return code and error), written by probe_job
when it ends.

An augment (`cg-ray augment`, cg_ray.serve.augments) is the same kind of job and runs on the same machinery:
`start(..., command="augment")` in its own folder (augment.job/), the command recorded in its start.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.probe import read_probe_results
from cg_ray.describe.config import ExplainConfig
from cg_ray.errors import CgRayError
from cg_ray.probe.config import ProbeConfig
from cg_ray.report.documents import clean
from cg_ray.serve.errors import api_error
from cg_ray.serve.jobs import (
    JOB_STATUS,
    job_client,
    job_lock,
    job_time,
    last_error_line,
    ray_job_state,
    read_job_file,
    submit_job,
    write_job_file,
)
from cg_ray.serve.redact import MAX_CHARS, scrub_paths
from cg_ray.serve.settings import ProbeSettings, ServiceSettings

JOB_DIR = "probe.job"  # in the analysis' folder, beside its run
CONFIG, STARTED, OUTCOME = "probe.json", "started.json", "outcome.json"
START_LOCK = ".start.lock"  # held while a start checks that none runs and records itself
LOG, ERRORS = "probe.log", "errors.log"  # the probe's own lines (its progress); everything else it logs
PROGRESS_LINES = 20
START_GRACE_S = 60.0  # a start recorded this long ago without its process' id: the service died between them
NO_MODEL = (
    "the analysis does not record the model that answered its rows (its scores were uploaded): name the model "
    'that answers the items in the request\'s "model", e.g. {"backend": "endpoint", "model": NAME, '
    '"endpoint": {"url": URL}} with URL among the service\'s probe.endpoints'
)
OPERATOR_FIELDS = {"reader": "the run's reader checks the items", "reader_factory": "the service's probe settings"}
Config = TypeVar("Config", bound=BaseModel)
Reached = list[tuple[str, str | None, str | None]]  # (field, URL, key variable)


def probe_config(body: dict[str, Any], settings: ProbeSettings) -> ProbeConfig:
    """The request's probe settings, validated once (422 naming the field, never echoing a value), with the
    operator's reader; endpoints and key variables only from the service's lists."""
    config = job_config(ProbeConfig, body, settings, "probe")
    check_reached(_reached(config), settings, "probe")
    return config


def job_config(model: type[Config], body: dict[str, Any], settings: ProbeSettings, what: str) -> Config:
    """A job's settings (`model`: ProbeConfig, AugmentConfig) from a request's body, validated once: 422 naming
    the field, never echoing a value; the reader and its factory are the operator's."""
    for key, whose in OPERATOR_FIELDS.items():
        if key in body:
            raise api_error(422, f"{what} setting {key}: not a request's to set ({whose})", field=key)
    try:
        return model.model_validate({**body, "reader_factory": settings.reader_factory})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise api_error(422, f"{what} setting {where}: {first['msg']}", field=where) from None


def check_reached(reached: Reached, settings: ProbeSettings, what: str) -> None:
    """422 (before anything is sent) unless every endpoint is under the service's list and every key
    variable in it."""
    for where, url, key_env in reached:
        if url is None or not any(url == a or url.startswith(a.rstrip("/") + "/") for a in settings.endpoints):
            allowed = ", ".join(settings.endpoints) or f"none: the service allows no {what} endpoint"
            said = f"{what} setting {where}: not an endpoint this service allows ({allowed})"
            raise api_error(422, said, field=where)
        if key_env is not None and key_env not in settings.key_envs:
            raise api_error(422, f"{what} setting {where}: {key_env!r} is not a key variable this service allows")


def writer_reached(w: ExplainConfig) -> Reached:
    """The writer's endpoint and its judge's, where set apart; a writer without an endpoint would load weights
    on the service's machines, so it counts with no URL."""
    out: Reached = [("writer.endpoint", w.endpoint, w.api_key_env)]
    if w.judge_endpoint is not None or w.judge_api_key_env is not None:
        out.append(("writer.judge_endpoint", w.judge_endpoint or w.endpoint, w.judge_api_key_env))
    return out


def _reached(config: ProbeConfig) -> Reached:
    """(field, URL, key variable) of every model the probe would call outside the run; an answering model
    without an endpoint counts with no URL, as a writer's does."""
    out: Reached = [] if config.writer is None else writer_reached(config.writer)
    if config.model is not None:
        endpoint = config.model.endpoint if config.model.backend == "endpoint" else None
        if endpoint is None:
            out.append(("model.endpoint", None, None))
        else:
            out.append(("model.endpoint", endpoint.url, endpoint.api_key_env))
    return out


def check_gaps(run: Path, config: ProbeConfig) -> None:
    """The plan the probe will make, made once here: an unknown gap, or a run that records no model to answer,
    is the request's 422 (naming the gap and the run's), not a failed probe later."""
    from cg_ray.probe.gaps import GapError
    from cg_ray.probe.plan import NoAnsweringModel, make_plan

    try:
        make_plan(run, config)
    except NoAnsweringModel:
        raise api_error(422, NO_MODEL, field="model") from None
    except CgRayError as exc:
        field = "gaps" if isinstance(exc, GapError) else None
        raise api_error(422, scrub_paths(str(exc))[:MAX_CHARS], field=field) from None


def job_files(command: str) -> tuple[str, str]:
    """(settings, log) file names of a job of `command` in its folder: probe.json and probe.log for a probe."""
    return f"{command}.json", f"{command}.log"


def _command(job: Path) -> str:
    return str(
        (read_job_file(job / STARTED) or {}).get("command") or "probe"
    )  # starts recorded before augments: probes


def start(
    job: Path, run: Path, config: BaseModel, fresh: bool, settings: ServiceSettings, command: str = "probe"
) -> None:
    """Start the probe, or another job of `command` (`augment`), as a Ray job or a process (`probe.runner`);
    409 while one of this analysis runs. An earlier one that did not finish is resumed with the same settings
    unless `fresh` (the CLI's --fresh). Two requests at once (two replicas on one host, or two threads of one)
    take turns on a lock file: the second sees the first's start."""
    job.mkdir(parents=True, exist_ok=True)
    settings_file, log = job_files(command)
    with job_lock(job / START_LOCK):
        if status(job) in ("pending", "running"):
            article = "an" if command[0] in "aeiou" else "a"
            raise api_error(409, f"{article} {command} of this analysis is running: follow it with GET …/{command}")
        for name in (OUTCOME, log, ERRORS):
            (job / name).unlink(missing_ok=True)
        chosen = config.model_dump(mode="json", exclude_unset=True)
        write_job_file(job / settings_file, json.dumps(chosen, indent=1))  # JSON is YAML: the CLI's --config
        started = {"started_at": job_time(), "host": socket.gethostname(), "pid": None, "settings": chosen,
                   "command": command}  # fmt: skip
        write_job_file(job / STARTED, json.dumps(started))
        # The service's own interpreter: the cluster runs the same image, and a bare `cg-ray` may not be on PATH.
        argv = [sys.executable, "-m", "cg_ray.serve.probe_job", str(job), str(run), *(["--fresh"] if fresh else []),
                f"--command={command}"]  # fmt: skip
        if settings.probe.runner == "ray_job":
            _submit(job, argv, started, settings.ray_address)
        else:
            _spawn(job, argv, started)


def _failed_to_start(job: Path, why: str) -> None:
    """Recorded as the job's outcome: it failed, and says why."""
    said = f"cg-ray {_command(job)}: error: {why}"
    write_job_file(job / ERRORS, f"{said}\n")
    write_job_file(job / OUTCOME, json.dumps({"returncode": 1, "finished_at": job_time(), "error": said}))


def _submit(job: Path, argv: list[str], started: dict[str, Any], address: str | None) -> None:
    """The probe as a Ray job; its id (unique per start: Ray keeps ended jobs' ids) and the dashboard it was
    submitted to are recorded, so any replica can follow or stop it."""
    submission = f"cg-ray-{started.get('command', 'probe')}-{job.parent.name}-{uuid.uuid4().hex[:8]}"
    try:
        client = job_client(address, attempts=3)
        job_id = submit_job(client, entrypoint=shlex.join(argv), submission_id=submission)
    except Exception as exc:  # the dashboard is down, or refuses the job
        _failed_to_start(job, f"its Ray job was not submitted ({type(exc).__name__}: {str(exc)[:300]})")
        return
    write_job_file(job / STARTED, json.dumps({**started, "ray_job": str(job_id), "ray_address": address}))


def _spawn(job: Path, argv: list[str], started: dict[str, Any]) -> None:
    try:  # a session of its own: the probe outlives a request and is not stopped with the replica's signals
        process = subprocess.Popen(
            argv, cwd=job, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        _failed_to_start(job, f"its process did not start ({exc.strerror})")
        return
    threading.Thread(target=process.wait, daemon=True).start()  # reaped when it ends (no zombie)
    write_job_file(job / STARTED, json.dumps({**started, "pid": process.pid}))


def _ray_job_state(started: dict[str, Any]) -> str | None:
    """PENDING | RUNNING | SUCCEEDED | FAILED | STOPPED, or None when its dashboard cannot be reached."""
    try:
        return ray_job_state(job_client(started.get("ray_address"), attempts=1), started["ray_job"])
    except Exception:  # the cluster is unreachable: it cannot be told
        return None


def _alive(started: dict[str, Any]) -> bool:
    """Whether the probe still runs: its Ray job has not ended (taken to run while its cluster cannot be
    reached), or its process runs; a process on another host than this replica's cannot be seen, and is
    taken to run until its outcome is written."""
    if started.get("ray_job"):
        return JOB_STATUS.get(_ray_job_state(started) or "") not in ("succeeded", "failed")
    if started.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(started["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(job: Path) -> None:
    """End the probe (its analysis is being deleted): its Ray job, or its process if it runs on this host with
    its whole session, the private Ray cluster it started included."""
    started = read_job_file(job / STARTED)
    if started is None or read_job_file(job / OUTCOME) is not None:
        return
    if started.get("ray_job"):
        with contextlib.suppress(Exception):  # the cluster may be gone: the analysis is deleted either way
            job_client(started.get("ray_address"), attempts=2).stop_job(started["ray_job"])
        return
    if started.get("pid") is not None and started.get("host") == socket.gethostname():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(started["pid"]), signal.SIGTERM)


def status(job: Path) -> str | None:
    """pending | running | succeeded | failed; None when the analysis was never probed over REST."""
    started = read_job_file(job / STARTED)
    if started is None:
        return None
    outcome = read_job_file(job / OUTCOME)
    if outcome is not None:
        return "succeeded" if outcome.get("returncode") == 0 else "failed"
    if started.get("pid") is None and not started.get("ray_job"):  # between its start and its process' start
        return "failed" if time.time() - (job / STARTED).stat().st_mtime > START_GRACE_S else "pending"
    if not _alive(started):
        return "failed"
    log = job / job_files(_command(job))[1]
    return "running" if log.is_file() and log.stat().st_size else "pending"


def progress(job: Path, lines: int = PROGRESS_LINES, name: str | None = None) -> list[str]:
    """The last lines of the job's log (its lines per gap and step), server paths scrubbed."""
    name = name or job_files(_command(job))[1]
    try:
        with (job / name).open(encoding="utf-8", errors="replace") as log:
            tail = deque((line.rstrip("\n") for line in log if line.strip()), maxlen=lines)
    except OSError:
        return []
    return [scrub_paths(line)[:MAX_CHARS] for line in tail]


def _error(job: Path, state: str) -> str | None:
    if state != "failed":
        return None
    command = _command(job)
    if read_job_file(job / OUTCOME) is None:
        started = read_job_file(job / STARTED) or {}
        from_ray = _ray_job_error(started) if started.get("ray_job") else None
        return from_ray or (
            f"the {command}'s process ended without recording an outcome (the service restarted?): POST again to "
            "resume it"
        )
    if said := (read_job_file(job / OUTCOME) or {}).get("error"):  # the job's own words: its exception's message
        return scrub_paths(str(said))[:MAX_CHARS]
    return last_error_line(progress(job, 200, ERRORS)) or f"the {command} failed and wrote nothing"


def _ray_job_error(started: dict[str, Any]) -> str | None:
    """The last error line of a Ray job that ended before probe_job could record its outcome (its entrypoint
    did not start, or the job was stopped)."""
    try:
        logs = str(job_client(started.get("ray_address"), attempts=1).get_job_logs(started["ray_job"]))
    except Exception:
        return None
    last = last_error_line([line for line in logs.splitlines() if line.strip()])
    last = last or f"Ray job {started['ray_job']} ended and wrote nothing"
    return f"its Ray job {started['ray_job']} ended without recording an outcome: {scrub_paths(last)[:MAX_CHARS]}"


def job_report(job: Path) -> dict[str, Any] | None:
    """What every job's status document holds (its state, times, settings, progress, error); None when none
    was started over REST."""
    state = status(job)
    if state is None:
        return None
    started, outcome = read_job_file(job / STARTED) or {}, read_job_file(job / OUTCOME) or {}
    return {
        "status": state,
        "started_at": started.get("started_at"),
        "finished_at": outcome.get("finished_at"),
        "settings": started.get("settings") or {},
        "progress": progress(job),
        "error": _error(job, state),
    }


def report(job: Path, run: RunDir) -> dict[str, Any] | None:
    """The probe's status document (GET …/probe); None when the analysis was never probed over REST."""
    found = job_report(job)
    if found is None:
        return None
    results, decision = None, None
    if found["status"] == "succeeded":
        records = read_probe_results(run)
        results = None if records is None else clean([r.row() for r in records])
        decision = (run.read_json_if_present(L.PROBE_SUMMARY) or {}).get("decision")
    return {**found, "decision": decision, "results": results}
