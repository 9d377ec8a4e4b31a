"""The process a service probe runs in (cg_ray.serve.probes): `python -m cg_ray.serve.probe_job JOB_DIR RUN_DIR
[--fresh]` runs `cg-ray probe RUN_DIR --config JOB_DIR/probe.json` with its lines (stdout: the plan, a line per
gap and step, the verdicts) in the job's log and everything else (logging, Ray's progress, errors) in its
error log, and records its outcome when it ends, however it ends, so that any replica can report it."""

from __future__ import annotations

import json
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from cg_ray.serve.jobs import open_job_log, write_job_file
from cg_ray.serve.probes import CONFIG, ERRORS, LOG, OUTCOME


def main(argv: list[str]) -> int:
    job, run, *flags = argv
    folder = Path(job)
    with open_job_log(folder / LOG) as log, open_job_log(folder / ERRORS) as errors:
        code = _probe(["probe", run, "--config", str(folder / CONFIG), *flags], log, errors)
    finished = datetime.now(UTC).isoformat(timespec="seconds")
    write_job_file(folder / OUTCOME, json.dumps({"returncode": code, "finished_at": finished}))
    return code


def _probe(argv: list[str], log: IO[str], errors: IO[str]) -> int:
    from cg_ray.cli import main as cli_main

    with redirect_stdout(log), redirect_stderr(errors):
        try:
            return cli_main(argv)
        except BaseException:  # the outcome is recorded whatever ends the probe (the CLI's own errors return 2)
            traceback.print_exc()
            print(f"cg-ray probe: error: {traceback.format_exc().strip().splitlines()[-1]}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
