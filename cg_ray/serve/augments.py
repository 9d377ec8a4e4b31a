"""An augment of an analysis' benchmark (`cg-ray augment`, docs/augment.md) started over REST and followed.

It is the probe's kind of job and runs on the probe's machinery (cg_ray.serve.probes: `start(...,
command="augment")`, a Ray job or a process as `probe.runner` says, followed through files of its folder,
augment.job/). The request is checked once before anything starts: its settings (`AugmentConfig`, 422 naming
the field), its writer's endpoint and key variable, the run's scope (409 until POST …/scope made one), and
the plan augment will make (an unknown benchmark or a `concept:ID` that is no in-scope gap: 422 with
augment's own words).

The writer's endpoints and key variables are the service's `probe:` lists, deliberately not a block of their
own: the augment's writer is the probe's writer (the same `ExplainConfig`, `LLMGenerator` and reference
checker), its items are checked by the same reader (`probe.reader_factory`) and it runs on the same runner.
What an operator decides there is which endpoints the service may send requests and keys to; that trust does
not depend on the route, and a second list would only drift from the first.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.augment.config import AugmentConfig
from cg_ray.errors import CgRayError, InputError
from cg_ray.report.documents import clean
from cg_ray.serve import probes
from cg_ray.serve.errors import api_error
from cg_ray.serve.redact import MAX_CHARS, scrub_paths
from cg_ray.serve.settings import ProbeSettings

JOB_DIR = "augment.job"  # in the analysis' folder, beside its run and its probe.job
COMMAND = "augment"
# augment's messages name its CLI flags: over REST they are the body's fields
_FLAGS = {"--gap": "gaps", "--reference": "reference", "--benchmark": "benchmark"}
_FLAG = re.compile("|".join(map(re.escape, sorted(_FLAGS, key=len, reverse=True))))


def augment_config(body: dict[str, Any], settings: ProbeSettings) -> AugmentConfig:
    """The request's augment settings, validated once (422 naming the field, never echoing a value), with the
    operator's reader; a writer named by an endpoint and key variable among the service's."""
    config = probes.job_config(AugmentConfig, body, settings, COMMAND)
    if config.writer is None:
        raise api_error(
            422,
            'augment setting writer: name the model that writes items, {"endpoint": URL, "model": NAME} with URL '
            "among the service's probe.endpoints",
            field="writer",
        )
    probes.check_reached(probes.writer_reached(config.writer), settings, COMMAND)
    return config


def check_plan(run: Path, analysis_id: str, config: AugmentConfig) -> None:
    """The plan augment will make, made once here: no scope yet is a 409 saying to make one; an unknown
    benchmark or reference, or a gap that is not in scope, the request's 422 with augment's words."""
    from cg_ray.augment.plan import make_plan

    rd = RunDir(run)
    if not rd.has(L.SCOPE_GAPS) or not rd.has(L.SCOPE_SUMMARY):
        raise api_error(
            409,
            f"analysis {analysis_id!r} has no scope: POST /v1/analyses/{analysis_id}/scope first (augment writes "
            "items for the in-scope gaps it finds)",
        )
    try:
        make_plan(run, config)
    except CgRayError as exc:
        said = scrub_paths(exc.reason if isinstance(exc, InputError) else str(exc))  # the run's path left out
        flag = _FLAG.search(said)
        field = _FLAGS[flag.group(0)] if flag else _field(said)
        said = _FLAG.sub(lambda m: _FLAGS[m.group(0)], said)
        raise api_error(422, said[:MAX_CHARS], field=field) from None


def _field(said: str) -> str | None:
    if said.startswith("concept:"):
        return "gaps"
    if "benchmark" in said.split(":", 1)[0]:
        return "benchmark"
    return None


def report(job: Path, run: RunDir) -> dict[str, Any] | None:
    """The augment's status document (GET …/augment); None when none was started over REST. Once it
    succeeded, its summary (augment/summary.json) less the run's server path."""
    found = probes.job_report(job)
    if found is None:
        return None
    summary = None
    if found["status"] == "succeeded":
        written = run.read_json_if_present(L.AUGMENT_SUMMARY)
        summary = None if written is None else clean({k: v for k, v in written.items() if k != "run"})
    return {**found, "summary": summary}
