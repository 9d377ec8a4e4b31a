"""The report of a published run kept in step with it: each command that changes files the report shows
(describe, explain, validate, robustness, the job's describe step) calls `refresh_report` afterwards. The
call sits in the command, not in `RunDir.update`, so that the import of the report is one the layer
contracts see (the steps themselves live below the report)."""

from __future__ import annotations

from pathlib import Path

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.report.html import build_report


def refresh_report(run: RunDir) -> Path | None:
    """Rebuild RUN/report.html when the run has one (a run without a report stays without: the user did not
    ask for one); returns its path, or None."""
    if not run.has(S.REPORT_FILE):
        return None
    return build_report(run)
