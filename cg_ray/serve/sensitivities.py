"""A sensitivity of an analysis (`cg-ray sensitivity`, issue #51) started over REST and followed until it ends.

The request is checked once, before anything is read: each reader against the service's `sensitivity:`
settings (422 naming it), the run against the library's plan (`plan_sensitivity`: its reader recorded, each
other reader known and not the run's own, its rows at most `sensitivity.max_rows`). Then
`run_sensitivity` runs in a thread of the replica that took the request: its reader pool re-reads the rows on
the service's Ray cluster (minutes), and it publishes the run's sensitivity/ through `RunDir.update` as the
CLI does; the run's report is refreshed. Its state lives in files of the analysis' folder (sensitivity.job/):
the settings and plan, its log lines (the progress a client reads), the outcome; and a lock file the thread
holds while it runs, so any replica of the host tells a running one (409 to a second) from one whose replica
died (failed: POST again resumes it, the readers already read are kept).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from cg_ray import schemas as S
from cg_ray.activations.recorded import reader_of_run
from cg_ray.artifacts.layout import RunDir
from cg_ray.errors import CgRayError, ConfigError, InputError
from cg_ray.report.documents import clean
from cg_ray.sensitivity.config import SensitivityConfig
from cg_ray.sensitivity.run import SensitivityPlan, plan_sensitivity
from cg_ray.serve.errors import api_error
from cg_ray.serve.jobs import job_lock, job_time, open_job_log, read_job_file, write_job_file
from cg_ray.serve.probes import progress
from cg_ray.serve.redact import MAX_CHARS, scrub_paths
from cg_ray.serve.settings import SensitivitySettings

log = logging.getLogger(__name__)

JOB_DIR = "sensitivity.job"  # in the analysis' folder, beside its run
STARTED, OUTCOME, LOG = "started.json", "outcome.json", "sensitivity.log"
START_LOCK = ".start.lock"  # held while a start checks that none runs and records itself
RUNNING_LOCK = ".running.lock"  # held by the thread that runs it, for as long as it runs
LIBRARY_LOGGER = "cg_ray.sensitivity"  # its plan, a line per reader read and per reader compared


def _said(exc: CgRayError) -> str:
    said = exc.reason if isinstance(exc, InputError) else str(exc)
    return scrub_paths(said)[:MAX_CHARS]


def check_readers(readers: list[str] | None, own: str | None, settings: SensitivitySettings) -> tuple[str, ...]:
    """The readers a request names (default: every one the service allows but the run's own), each one the
    service's to re-read with, else a 422 naming it."""
    allowed = settings.readers
    if readers is None:
        readers = [r for r in allowed if r != own]
        if not readers:
            said = ", ".join(allowed) or "none"
            raise api_error(422, f"readers: no other reader to re-read with (this service's: {said})", field="readers")
    for name in readers:
        if name not in allowed:
            said = ", ".join(allowed) or "none: this service re-reads with no other reader"
            raise api_error(
                422,
                f"readers: {name[:200]!r} is not a reader this service re-reads with ({said}; sensitivity.readers)",
                field="readers",
            )
    if len(set(readers)) != len(readers):
        raise api_error(422, f"readers: a reader is named twice: {', '.join(readers)}", field="readers")
    return tuple(readers)


def own_reader(run: RunDir, settings: SensitivitySettings) -> str | None:
    """The SAE the run was read with, as its manifest records it; a run read by another reader factory than
    the service's (`sensitivity.reader_factory`) is a 422: its readers would not be comparable."""
    from cg_ray.activations.config import DEFAULT_READER_FACTORY

    recorded = reader_of_run(run.path, (run.read_json_if_present(S.SUMMARY_FILE) or {}).get("rows_file"))
    if recorded.unknown is not None:
        said = scrub_paths(recorded.unknown)[:MAX_CHARS]
        raise api_error(
            422,
            f"this analysis' rows cannot be re-read: its run records no reader ({said}); it was computed before "
            "analyses recorded their reader in manifest.json: run the analysis again",
        )
    if (recorded.factory or DEFAULT_READER_FACTORY) != settings.reader_factory:
        raise api_error(422, "this analysis' rows were read by another reader than the ones this service re-reads with")
    return recorded.sae.spec


def plan(run: RunDir, readers: tuple[str, ...], fresh: bool, settings: SensitivitySettings) -> SensitivityConfig:
    """The library's plan, made once here: its errors are the request's 422 (a reader that is the run's own
    or not installed names `readers`), and a run over `sensitivity.max_rows` is refused."""
    config = SensitivityConfig(run=run.path, readers=readers, reader_factory=settings.reader_factory, fresh=fresh)
    try:
        made: SensitivityPlan = plan_sensitivity(config)
    except ConfigError as exc:
        raise api_error(422, f"readers: {_said(exc)}", field="readers") from None
    except CgRayError as exc:
        raise api_error(422, _said(exc)) from None
    if made.rows > settings.max_rows:
        raise api_error(
            422,
            f"the analysis has {made.rows:,} rows, over the {settings.max_rows:,} this service re-reads "
            "(sensitivity.max_rows): run `cg-ray sensitivity` as a Ray job (docs/pipeline.md)",
        )
    return config


def _held(path: Path) -> bool:
    """Whether another open file (any thread or process of this host) holds the lock at `path`."""
    try:
        with open_job_log(path) as probe:  # the job files' one writer (cg_ray.serve.jobs)
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(probe, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def status(job: Path) -> str | None:
    """pending | running | succeeded | failed; None when none was started over REST. One whose replica ended
    before it recorded an outcome is failed; one started on another host is taken to run until it records one."""
    started = read_job_file(job / STARTED)
    if started is None:
        return None
    outcome = read_job_file(job / OUTCOME)
    if outcome is not None:
        return "succeeded" if outcome.get("ok") else "failed"
    if _held(job / RUNNING_LOCK) or started.get("host") != socket.gethostname():
        log_file = job / LOG
        return "running" if log_file.is_file() and log_file.stat().st_size else "pending"
    return "failed"


def start(job: Path, run: RunDir, config: SensitivityConfig) -> None:
    """Start re-reading in a thread of this replica; 409 while one of this analysis runs. A finished one's
    files are replaced; the readers it read are kept unless `fresh`."""
    job.mkdir(parents=True, exist_ok=True)
    with job_lock(job / START_LOCK):
        lock = open_job_log(job / RUNNING_LOCK)  # the worker closes it
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise api_error(
                409, "a sensitivity of this analysis is running: follow it with GET …/sensitivity"
            ) from None
        for name in (OUTCOME, LOG):
            (job / name).unlink(missing_ok=True)
        settings = {"readers": list(config.readers), "fresh": config.fresh}
        started = {"started_at": job_time(), "host": socket.gethostname(), "pid": os.getpid(), "settings": settings}
        write_job_file(job / STARTED, json.dumps(started))
        worker = threading.Thread(target=_work, args=(job, run, config, lock), daemon=True, name=f"sensitivity {job}")
        worker.start()


class _ThreadLines(logging.Handler):
    """The library's lines of one thread, into the job's log."""

    def __init__(self, out: IO[str], thread: int) -> None:
        super().__init__(logging.INFO)
        self.out, self.thread = out, thread
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.out.write(self.format(record) + "\n")
            self.out.flush()


@contextlib.contextmanager
def _lines_into(path: Path) -> Iterator[None]:
    library = logging.getLogger(LIBRARY_LOGGER)
    if library.getEffectiveLevel() > logging.INFO:
        library.setLevel(logging.INFO)
    with open_job_log(path) as out:
        handler = _ThreadLines(out, threading.get_ident())
        library.addHandler(handler)
        try:
            yield
        finally:
            library.removeHandler(handler)


def _work(job: Path, run: RunDir, config: SensitivityConfig, lock: IO[str]) -> None:
    """Runs in its thread: re-read, compare, publish, refresh the report; the outcome is recorded however it
    ends, then the lock is let go."""
    from cg_ray.report.refresh import refresh_report
    from cg_ray.sensitivity.run import run_sensitivity

    error: str | None = None
    try:
        with _lines_into(job / LOG):
            run_sensitivity(config)
            refresh_report(run)
    except CgRayError as exc:
        error = f"cg-ray sensitivity: error: {_said(exc)}"
    except Exception as exc:  # recorded, whatever ends it; the trace stays in the service's log
        log.exception("sensitivity of %s failed", run.path)
        error = f"cg-ray sensitivity: error: {type(exc).__name__}: {scrub_paths(str(exc))[:MAX_CHARS]}"
    finally:
        outcome = {"ok": error is None, "error": error, "finished_at": job_time()}
        try:
            write_job_file(job / OUTCOME, json.dumps(outcome))
        except OSError:  # the analysis was deleted meanwhile: nothing left to report to
            log.warning("sensitivity of %s: its outcome could not be recorded", run.path)
        finally:
            lock.close()


def _error(job: Path, state: str) -> str | None:
    if state != "failed":
        return None
    outcome = read_job_file(job / OUTCOME)
    if outcome is None:
        return "its replica ended before it finished (the service restarted?): POST again to resume it"
    return str(outcome.get("error") or "it failed and said nothing")


def view_of(run: RunDir) -> dict[str, Any] | None:
    """The run's sensitivity/ as the explorer and report show it (cg_ray.report.sensitivity), cleaned."""
    from cg_ray.report.sensitivity import sensitivity_view

    view = sensitivity_view(run)
    return None if view is None else clean(view)


def report(job: Path, run: RunDir) -> dict[str, Any] | None:
    """GET …/sensitivity: the job's state, its lines and the run's sensitivity/ view; None when neither a job
    was started over REST nor the run has sensitivity/ (made by the CLI)."""
    state = status(job)
    view = view_of(run)
    if state is None:
        if view is None:
            return None
        readers = [str(r.get("name")) for r in view.get("readers") or []]
        settings = {"readers": readers, "fresh": False}
        return {"status": "succeeded", "started_at": None, "finished_at": None, "settings": settings,
                "progress": [], "error": None, "view": view}  # fmt: skip
    started, outcome = read_job_file(job / STARTED) or {}, read_job_file(job / OUTCOME) or {}
    return {
        "status": state,
        "started_at": started.get("started_at"),
        "finished_at": outcome.get("finished_at"),
        "settings": started.get("settings") or {},
        "progress": progress(job, name=LOG),
        "error": _error(job, state),
        "view": view,
    }
