"""The last step of `cg-ray run`: readable descriptions (and, when configured, LLM explanations) of the
published run's weak / under-covered concepts, so the report a run leaves already reads as sentences.

It runs on the published directory: a failure here leaves the run itself intact and says how to retry.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cg_ray.describe.config import DescribeStepConfig, ExplainConfig

log = logging.getLogger(__name__)


def check_explainer(explain: ExplainConfig | None) -> None:
    """An explainer that cannot load fails the run before any row is generated or read."""
    if explain is not None:
        from cg_ray.describe.completers import check_model

        check_model(explain)


def describe_published_run(
    run_dir: Path, describe: DescribeStepConfig, explain: ExplainConfig | None, seed: int
) -> None:
    if not describe.enabled and explain is None:
        return
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.describe.run import DescribeOptions, describe_run
    from cg_ray.report.refresh import refresh_report

    run = RunDir(run_dir)
    options = DescribeOptions(top=describe.top, examples=describe.examples, seed=seed, tokens=describe.tokens)
    try:
        if explain is not None:
            from cg_ray.describe.explain import explain_run

            explain_run(run, options, explain)
        else:
            describe_run(run, options)
        refresh_report(run)
    except Exception:
        command = "explain" if explain is not None else "describe"
        log.error("the run is published at %s; describing it failed (retry: cg-ray %s %s)", run_dir, command, run_dir)
        raise
