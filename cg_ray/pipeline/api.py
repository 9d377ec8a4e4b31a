"""`cg-ray run` as a library call: `cg_ray.run(config)` (docs/api.md). The CLI parses its flags and calls
this, so a notebook and the command run the same steps and raise the same errors."""

from __future__ import annotations

import re
from pathlib import Path

from cg_ray.errors import CgRayError
from cg_ray.pipeline import runner
from cg_ray.pipeline.config import RunConfig, load_run_config

# How a Ray task's traceback names the exception it raised: "cg_ray.generation.endpoint.EndpointRefused: …".
_WORKER_ERROR = re.compile(r"^cg_ray(?:\.\w+)+\.(\w+(?:Error|Refused)): (.+)$", re.MULTILINE)


def run_suite(
    config: RunConfig | str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    shard_rows: int = 64,
    report: bool = True,
    config_source: str | None = None,
) -> Path:
    """Run a whole CG suite (generate, score, read, aggregate, judge, report) as a Ray Data job and return the
    published run directory (open it with `cg_ray.read_run`). `config`: a `RunConfig` or a YAML file's path.
    An endpoint that refuses (wrong URL, key or model) is found before anything is written; a cg_ray error
    inside a Ray task is raised as a `CgRayError` with its own message, not a Ray traceback. `config_source`:
    the file a `RunConfig` was read from, for the manifest."""
    source = config_source
    if not isinstance(config, RunConfig):
        source, config = str(config), load_run_config(config)
    for generation in [config.generation, *([config.judge] if config.judge is not None else [])]:
        if generation.backend == "endpoint":
            from cg_ray.generation.endpoint import check_endpoint

            check_endpoint(generation)
    options = runner.RunOptions(resume=resume, overwrite=overwrite, shard_rows=shard_rows, report=report)
    try:
        return runner.run(config, options, config_source=source)
    except Exception as exc:
        found = worker_error(exc)
        if found is None:
            raise
        raise CgRayError(found) from None


def worker_error(exc: BaseException) -> str | None:
    """The message of a cg_ray error raised inside a Ray task (Ray hands the driver its traceback as text:
    the exception's type and chain do not survive), or None when `exc` holds none."""
    import ray.exceptions

    if not isinstance(exc, ray.exceptions.RayError):
        return None
    found = _WORKER_ERROR.search(str(exc))
    return found.group(2) if found else None
