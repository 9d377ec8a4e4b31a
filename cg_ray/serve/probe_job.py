"""The process a service probe runs in (cg_ray.serve.probes): `python -m cg_ray.serve.probe_job JOB_DIR RUN_DIR
[--fresh] [--command=probe|augment]` runs the probe of RUN_DIR with JOB_DIR/probe.json's settings
(`cg_ray.probe.api.probe_run`, what `cg-ray probe` runs), or its augment with JOB_DIR/augment.json's, with its
lines (the plan, a line per gap and step, the verdicts) in the job's log (probe.log, augment.log) and everything
else (logging, Ray's progress, tracebacks) in its error log, and records its outcome when it ends, however it
ends, so that any replica can report it: its return code and, when it failed, its error (the exception's
message) in outcome.json, that line also last in the error log."""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from cg_ray.errors import CgRayError
from cg_ray.serve.jobs import open_job_log, write_job_file
from cg_ray.serve.probes import ERRORS, OUTCOME, job_files

RAY_PROGRESS_INTERVAL = ("RAY_DATA_NON_TTY_PROGRESS_LOG_INTERVAL", "60")  # Ray Data's progress, as the CLI's


def main(argv: list[str]) -> int:
    job, run, *flags = argv
    command = next((f.split("=", 1)[1] for f in flags if f.startswith("--command=")), "probe")
    folder = Path(job)
    settings, log_name = job_files(command)
    with open_job_log(folder / log_name) as log, open_job_log(folder / ERRORS) as errors:
        code, error = _run(command, Path(run), folder / settings, "--fresh" in flags, log, errors)
    finished = datetime.now(UTC).isoformat(timespec="seconds")
    write_job_file(folder / OUTCOME, json.dumps({"returncode": code, "finished_at": finished, "error": error}))
    return code


def _run(command: str, run: Path, settings: Path, fresh: bool, log: IO[str], errors: IO[str]) -> tuple[int, str | None]:
    """(return code, error or None): 0 when it ran, 2 for the probe's own errors (a CgRayError, its message),
    1 for anything else (its traceback in the error log, its last line the error)."""
    jobs: dict[str, Callable[[Path, Path, bool], None]] = {"probe": _probe, "augment": _augment}
    with redirect_stdout(log), redirect_stderr(errors):
        os.environ.setdefault(*RAY_PROGRESS_INTERVAL)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            datefmt="%H:%M:%S")  # fmt: skip
        try:
            jobs[command](run, settings, fresh)
            return 0, None
        except CgRayError as exc:
            code, why = 2, str(exc)
        except BaseException:  # the outcome is recorded whatever ends the job
            traceback.print_exc()
            code, why = 1, traceback.format_exc().strip().splitlines()[-1]
        error = f"cg-ray {command}: error: {why}"
        print(error, file=sys.stderr)
        return code, error


def _probe(run: Path, settings: Path, fresh: bool) -> None:
    from cg_ray.probe.api import probe_run, settings_file

    probe_run(run, settings_file(settings), fresh=fresh, say=print)


def _augment(run: Path, settings: Path, fresh: bool) -> None:
    """What `cg-ray augment RUN --config SETTINGS` does: its plan, its steps, a line per gap, the benchmark's
    coverage before → after, what it wrote and the report refreshed."""
    import yaml
    from pydantic import ValidationError

    from cg_ray.artifacts.layout import RunDir
    from cg_ray.augment.config import AugmentConfig
    from cg_ray.augment.plan import make_plan
    from cg_ray.augment.run import run_augment, summary_lines
    from cg_ray.errors import ConfigError
    from cg_ray.report.refresh import refresh_report

    try:
        config = AugmentConfig.model_validate(yaml.safe_load(settings.read_text(encoding="utf-8")) or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"augment setting {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    summary = run_augment(make_plan(run, config), fresh=fresh, say=print)
    print()
    for line in summary_lines(summary):
        print(line)
    print(f"wrote {run / 'augment'} (items.parquet, coverage.parquet, summary.json, export/)")
    if (report := refresh_report(RunDir(run))) is not None:
        print(f"updated {report}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
