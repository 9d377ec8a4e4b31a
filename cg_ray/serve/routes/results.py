"""Results of the caller's finished analyses, read from their run directories."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, Response

from cg_ray.serve import readable, results
from cg_ray.serve.api_types import (
    ArenaView,
    ConceptDetail,
    ConceptPage,
    Distributions,
    RunView,
    SubsetCoverage,
    SummaryView,
    ThemesView,
)
from cg_ray.serve.csv_safe import parquet_as_safe_csv, safe_csv_file
from cg_ray.serve.db import Analysis
from cg_ray.serve.deps import FinishedArena, FinishedRun, Owner, ServiceDep
from cg_ray.serve.errors import api_error
from cg_ray.serve.finding_types import ProfileView
from cg_ray.serve.routes import error_responses

router = APIRouter(
    prefix="/v1/analyses/{analysis_id}",
    tags=["results"],
    responses=error_responses(404, s409="the analysis has not succeeded"),
)


@router.get("/summary", response_model=SummaryView)
def get_summary(run: FinishedRun) -> SummaryView:
    return results.summary(run)


@router.get("/view", response_model=RunView)
def get_view(analysis_id: str, run: FinishedRun) -> RunView:
    """Every document the explorer draws for the analysis, as `cg-ray report` embeds them in report.html: the
    explorer and a report show the same numbers."""
    return results.view(run, analysis_id)


@router.get("/concepts", response_model=ConceptPage)
def get_concepts(
    run: FinishedRun,
    sort: results.SortKey = "X_model",
    order: Literal["asc", "desc"] = "asc",
    coverage_class: Annotated[Literal["missing", "under", "normal", "over"] | None, Query(alias="class")] = None,
    benchmark: str | None = None,
    q: Annotated[str | None, Query(max_length=200)] = None,
    model_gaps_only: bool = False,
    scored_only: bool = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ConceptPage:
    return results.concept_table(
        run,
        sort=sort,
        order=order,
        coverage_class=coverage_class,
        benchmark=benchmark,
        q=q,
        model_gaps_only=model_gaps_only,
        scored_only=scored_only,
        limit=limit,
        offset=offset,
    )


@router.get("/weaknesses", response_model=ProfileView)
def get_weaknesses(
    analysis_id: str,
    run: FinishedRun,
    kind: results.ProfileKind = "weaknesses",
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> ProfileView:
    """The weakness profile (or strengths / coverage gaps / weakest slices / failure modes beyond the
    metadata) in rank order, with intervals."""
    out = results.profile(run, kind, limit)
    if out is None:
        raise api_error(404, f"analysis {analysis_id!r} has no {kind} profile (made by an older version)")
    return out


@router.get("/concepts/{concept_id}", response_model=ConceptDetail)
def get_concept(run: FinishedRun, concept_id: int) -> ConceptDetail:
    detail = results.concept_detail(run, concept_id)
    if detail is None:
        raise api_error(404, f"no concept {concept_id}")
    return detail


@router.get("/themes", response_model=ThemesView)
def get_themes(run: FinishedRun) -> ThemesView:
    """Themes of the analysis's weak / under-covered concepts (`cg-ray describe`), same isolation."""
    found = readable.themes(run)
    if found is None:
        raise api_error(404, "this analysis has no themes (cg-ray describe has not run on it)")
    return found


@router.get("/distributions", response_model=Distributions)
def get_distributions(run: FinishedRun) -> Distributions:
    return results.distributions(run)


@router.get("/coverage", response_model=SubsetCoverage, responses=error_responses(422))
def get_subset_coverage(run: FinishedRun, benchmarks: Annotated[list[str], Query(min_length=1)]) -> SubsetCoverage:
    out = results.subset_coverage(run, benchmarks)
    if out is None:
        raise api_error(422, f"unknown benchmark in {benchmarks}", field="benchmarks")
    return out


@router.get("/artifacts/{name}", response_class=Response)
def get_artifact(run: FinishedRun, name: str) -> Response:
    """A run file by its public name (a fixed list: a client never names a server path); CSV on request."""
    source = results.DOWNLOADS.get(name)
    if source is None:
        raise api_error(404, f"no artifact {name!r}; available: {sorted(results.DOWNLOADS)}")
    if name.endswith(".csv"):  # every CSV download is neutralised against formula injection
        path = run.file(source)
        body = parquet_as_safe_csv(path) if source.endswith(".parquet") else safe_csv_file(path)
        return Response(body, media_type="text/csv", headers={"Content-Disposition": f'attachment; filename="{name}"'})
    return FileResponse(run.file(source), filename=name)


@router.get("/arena", response_model=ArenaView)
def get_arena(service: ServiceDep, owner: Owner, analysis_id: str, arena: FinishedArena) -> ArenaView:
    analysis = service.owned(Analysis, owner, analysis_id)
    return results.arena_view(arena, analysis.options.get("model_analyses", {}))
