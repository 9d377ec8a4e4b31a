"""GET /v1/diff?a=&b=: the concept-level diff of two of the caller's finished analyses (`cg-ray diff`).

Both analyses were read by this service's one reader, so the reader check is assumed (d_sae and any reader
fields the runs record are still compared); rows are paired by benchmark and row_id, as on the CLI.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from cg_ray.artifacts.layout import RunDir
from cg_ray.compare.identity import ReaderMismatch
from cg_ray.errors import InputError
from cg_ray.serve.comparison_types import DiffView
from cg_ray.serve.deps import Owner, ServiceDep, finished_run
from cg_ray.serve.errors import api_error
from cg_ray.serve.routes import error_responses

router = APIRouter(
    prefix="/v1",
    tags=["results"],
    responses=error_responses(
        404,
        s409="an analysis has not succeeded",
        s422="the analyses cannot be compared (reader, no shared rows)",
    ),
)


def _diff(runs: list[tuple[str, RunDir]], options: dict[str, Any]) -> DiffView:
    """diff.json of the two analyses, naming them by id (never by a server path), as the app draws it: the
    document diff.html embeds (cg_ray.report.comparisons.diff_document)."""
    from cg_ray.artifacts.contract import versioned
    from cg_ray.compare.config import DiffConfig
    from cg_ray.compare.diff import compute_diff
    from cg_ray.compare.outputs import summary_dict
    from cg_ray.report.comparisons import diff_document

    (id_a, run_a), (id_b, run_b) = runs
    summary = summary_dict(compute_diff(run_a, run_b, DiffConfig(assume_same_reader=True, **options)))
    for key, analysis_id in (("a", id_a), ("b", id_b)):
        summary["runs"][key]["path"] = analysis_id
        summary["runs"][key]["reader"]["source"] = None
    return DiffView.model_validate(diff_document(versioned(summary)))


@router.get("/diff", response_model=DiffView)
async def get_diff(
    service: ServiceDep,
    owner: Owner,
    a: Annotated[str, Query(description="baseline analysis id")],
    b: Annotated[str, Query(description="analysis compared with a")],
    resamples: Annotated[int, Query(ge=0, le=5000)] = 1000,
    seed: int = 0,
    top: Annotated[int, Query(ge=0, le=100)] = 10,
    min_rows: Annotated[int, Query(ge=1)] = 10,
    rank_by: Literal["delta", "relative"] = "delta",
) -> DiffView:
    run_a, run_b = finished_run(service, owner, a), finished_run(service, owner, b)
    options = {"resamples": resamples, "seed": seed, "top": top, "min_rows": min_rows, "rank_by": rank_by}

    def scrub(message: str) -> str:  # errors name the analyses, never the server's paths
        return message.replace(str(run_a.path), a).replace(str(run_b.path), b)

    try:
        return await asyncio.to_thread(_diff, [(a, run_a), (b, run_b)], options)
    except ReaderMismatch as exc:
        raise api_error(422, scrub(str(exc)), field="b") from None
    except InputError as exc:  # no shared rows, nothing scored in both
        raise api_error(422, scrub(exc.reason), field=exc.field) from None
