"""The process a service probe runs in (cg_ray.serve.probes): `python -m cg_ray.serve.probe_job JOB_DIR RUN_DIR
[--fresh] [--command=probe|augment]` runs `cg-ray probe RUN_DIR --config JOB_DIR/probe.json` (or `cg-ray augment
RUN_DIR --config JOB_DIR/augment.json`) with its lines (stdout: the plan, a line per gap and step, the verdicts)
in the job's log (probe.log, augment.log) and everything else (logging, Ray's progress, errors) in its error
log, and records its outcome when it ends, however it ends, so that any replica can report it."""

from __future__ import annotations

import json
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from cg_ray.serve.jobs import open_job_log, write_job_file
from cg_ray.serve.probes import ERRORS, OUTCOME, job_files


def main(argv: list[str]) -> int:
    job, run, *flags = argv
    command = next((f.split("=", 1)[1] for f in flags if f.startswith("--command=")), "probe")
    flags = [f for f in flags if not f.startswith("--command=")]
    folder = Path(job)
    settings, log_name = job_files(command)
    with open_job_log(folder / log_name) as log, open_job_log(folder / ERRORS) as errors:
        code = _run([command, run, "--config", str(folder / settings), *flags], log, errors)
    finished = datetime.now(UTC).isoformat(timespec="seconds")
    write_job_file(folder / OUTCOME, json.dumps({"returncode": code, "finished_at": finished}))
    return code


def _run(argv: list[str], log: IO[str], errors: IO[str]) -> int:
    from cg_ray.cli import main as cli_main

    with redirect_stdout(log), redirect_stderr(errors):
        try:
            return cli_main(argv)
        except BaseException:  # the outcome is recorded whatever ends the job (the CLI's own errors return 2)
            traceback.print_exc()
            print(f"cg-ray {argv[0]}: error: {traceback.format_exc().strip().splitlines()[-1]}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
