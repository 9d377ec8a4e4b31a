"""A scope of an analysis' run (`cg-ray scope`, docs/method.md "Benchmark gaps in scope"): made, then read."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.concurrency import run_in_threadpool

from cg_ray.serve import scopes
from cg_ray.serve.api_types import ScopeRequestBody, ScopeView
from cg_ray.serve.deps import FinishedRun, ServiceDep
from cg_ray.serve.errors import api_error
from cg_ray.serve.routes import error_responses

router = APIRouter(
    prefix="/v1/analyses/{analysis_id}",
    tags=["scope"],
    responses=error_responses(404, s409="the analysis has not succeeded, or a scope of it is running"),
)
REQUEST = Body(
    description="what to scope against what: `benchmarks` (default: every one not a reference), `references` "
    "(sibling benchmarks of the analysis, pooled), `suite`, the rule (`min_share`, `ratio`, `fdr`) and an "
    "optional `judge` (`model`, `endpoint` under the service's scope.endpoints, `api_key_env` from its "
    "scope.key_envs, `descriptions` of every benchmark scoped, `batch`, `include_missing`). Rows files of "
    "real use (`cg-ray scope --reference-rows`) are not accepted: they are server paths; upload such rows as "
    "a benchmark of the analysis and name it in `references`",
    examples=[{"benchmarks": ["narrow"], "references": ["wide"]}],
)


@router.post("/scope", response_model=ScopeView, responses=error_responses(422, 502))
async def make_scope(
    service: ServiceDep, analysis_id: str, run: FinishedRun, body: Annotated[ScopeRequestBody, REQUEST]
) -> ScopeView:
    """Scope the analysis' benchmarks against sibling benchmarks of it, in the request: per benchmark, the
    concepts the reference confidently uses that it confidently tests less (its in-scope gaps with their
    evidence), and the coverage figures; with `judge`, an LLM's verdict on each gap's scope (at most the
    service's scope.max_judge_requests requests; its endpoint and key variable only from the service's
    `scope:` settings). Written to the run's scope/ (an earlier scope's other (benchmark, reference) pairs are
    kept); answers the run's scope view, as GET shows it. A bad request is a 422 naming the field, with
    nothing sent and nothing written; reference rows files are not accepted over REST (server paths)."""
    settings = service.settings.scope
    rule = scopes.scope_rule(body)
    judge = scopes.scope_judge(body, settings)
    folder = service.settings.analyses_dir / analysis_id
    view = await run_in_threadpool(scopes.make_scope, run, folder, body, rule, judge, settings.max_judge_requests)
    return ScopeView.model_validate(view)


@router.get("/scope", response_model=ScopeView)
def get_scope(analysis_id: str, run: FinishedRun) -> ScopeView:
    """The run's scope: the rule in words, the suite's coverage figures, and per (benchmark, reference) its
    counts, coverage and most confident gaps in words with their evidence (and a judge's verdicts)."""
    view = scopes.view_of(run)
    if view is None:
        raise api_error(404, f"analysis {analysis_id!r} has no scope: POST /v1/analyses/{analysis_id}/scope makes one")
    return ScopeView.model_validate(view)
