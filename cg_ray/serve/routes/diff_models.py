"""diff-models over the caller's uploads (`cg-ray diff-models` in the service): POST starts an analysis that
GET /v1/analyses/{id} follows, cancel and delete stop and remove like any other; GET /v1/diff-models/{id}
reads its result (a page of its concepts), GET .../view the whole document the explorer draws (the one
diff_models.html embeds), GET .../concepts/{concept_id} a concept's paired examples."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from cg_ray.errors import InputError
from cg_ray.serve import model_diff_results
from cg_ray.serve.api_types import AnalysisView
from cg_ray.serve.comparison_types import (
    DiffModelsConceptDetail,
    DiffModelsDocument,
    DiffModelsRequest,
    DiffModelsView,
)
from cg_ray.serve.db import Analysis, Upload, new_id
from cg_ray.serve.deps import FinishedDiffModels, Owner, Service, ServiceDep
from cg_ray.serve.errors import api_error
from cg_ray.serve.model_diffs import MODE, pair_sides, request_sides
from cg_ray.serve.redact import scrub_paths
from cg_ray.serve.routes import error_responses
from cg_ray.serve.routes.analyses import check_running

MAX_TOP, MAX_EXAMPLES = 100, 20

router = APIRouter(
    prefix="/v1/diff-models",
    tags=["diff-models"],
    responses=error_responses(
        404, 413, s409="the analysis has not succeeded", s422="the uploads cannot be paired (field and line named)"
    ),
)


def check_form(service: Service, owner: str, body: DiffModelsRequest) -> list[Upload]:
    """One upload with two of its models, or two uploads; each named field within the limits (else 4xx)."""
    if (body.upload_id is None) == (body.upload_a is None and body.upload_b is None):
        raise api_error(422, "give upload_id (with model_a and model_b) or upload_a and upload_b", field="upload_id")
    if body.upload_id is not None:
        ids = [body.upload_id]
        for name in ("model_a", "model_b"):
            if getattr(body, name) is None:
                raise api_error(422, "upload_id needs model_a and model_b (its models)", field=name)
        if body.model_a == body.model_b:
            raise api_error(422, "model_a and model_b are the same model", field="model_b")
    else:
        ids = [str(body.upload_a), str(body.upload_b)]
        for name in ("upload_a", "upload_b"):
            if getattr(body, name) is None:
                raise api_error(422, "give both upload_a and upload_b", field=name)
        if body.upload_a == body.upload_b:
            raise api_error(422, "upload_a and upload_b are the same upload", field="upload_b")
    limits = service.settings.limits
    for name in ("model_a", "model_b"):
        if len(getattr(body, name) or "") > limits.max_name_chars:
            raise api_error(413, f"{name} is over the {limits.max_name_chars}-character limit", field=name)
    for name, most in (("top", MAX_TOP), ("examples", MAX_EXAMPLES)):
        if getattr(body, name) > most:
            raise api_error(422, f"{name}: at most {most}", field=name)
    uploads = [service.owned(Upload, owner, upload_id) for upload_id in ids]
    for upload in uploads:
        if upload.fields.get("kind") == "battles":
            raise api_error(422, f"upload {upload.id!r} holds battles, not answers", field="upload_id")
    return uploads


def check_pairs(service: Service, owner: str, body: DiffModelsRequest) -> int:
    """The number of pairs, once the answers pair (else 422 naming upload, line and field)."""
    try:
        a, b = request_sides(service.store, owner, body)
        paired = pair_sides(a, b, body)
    except InputError as exc:
        raise api_error(422, scrub_paths(exc.reason), line=exc.line, field=exc.field) from None
    texts = 2 * len(paired.pairs)
    if texts > service.settings.small_analysis_rows:
        raise api_error(
            413,
            f"{texts:,} answers to read, over the service's {service.settings.small_analysis_rows:,}: "
            "run `cg-ray diff-models` as a Ray job",
        )
    if len(paired.pairs) < 2:
        raise api_error(422, f"{len(paired.pairs)} prompt answered by both: diff-models needs 2", field="upload_id")
    return len(paired.pairs)


@router.post("", status_code=202, response_model=AnalysisView)
async def create_diff_models(service: ServiceDep, owner: Owner, body: DiffModelsRequest) -> AnalysisView:
    """Start a diff-models analysis; follow it with GET /v1/analyses/{id}, read it with GET /v1/diff-models/{id}."""
    uploads = check_form(service, owner, body)
    await asyncio.to_thread(check_pairs, service, owner, body)
    check_running(service, owner)
    analysis_id = new_id("ana")
    with service.store.session() as s:
        row = Analysis(
            id=analysis_id,
            owner=owner,
            upload_ids=[u.id for u in uploads],
            mode=MODE,
            options=body.model_dump(mode="json"),
        )
        s.add(row)
    service.start_analysis(analysis_id)
    return AnalysisView.model_validate(row)


@router.get("/{analysis_id}", response_model=DiffModelsView)
def get_diff_models(
    analysis_id: str,
    folder: FinishedDiffModels,
    sort: model_diff_results.SortKey = "abs_delta",
    order: Literal["asc", "desc"] = "desc",
    hypotheses_only: bool = False,
    q: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> DiffModelsView:
    """Counts, settings, hypotheses, and a page of the concepts active in an answer: the share of A's and of
    B's answers where each is active, Δ = B − A with its interval, hypothesis and its held-out verdict."""
    return model_diff_results.page(
        folder, analysis_id, sort=sort, order=order, hypotheses_only=hypotheses_only, q=q, limit=limit, offset=offset
    )


@router.get("/{analysis_id}/view", response_model=DiffModelsDocument)
def get_diff_models_view(folder: FinishedDiffModels) -> DiffModelsDocument:
    """Everything the explorer draws for the analysis, in one document — the one its diff_models.html
    embeds: the findings (hypotheses with their examples) and every concept's row, column by column."""
    return model_diff_results.view(folder)


@router.get("/{analysis_id}/concepts/{concept_id}", response_model=DiffModelsConceptDetail)
def get_diff_models_concept(
    folder: FinishedDiffModels,
    concept_id: int,
    examples: Annotated[int, Query(ge=1, le=MAX_EXAMPLES)] = 5,
) -> DiffModelsConceptDetail:
    """The concept's row and its paired examples: prompts where it is in A's answer and not B's (a_more),
    and the reverse (b_more), each with the prompt and both answers."""
    detail = model_diff_results.concept(folder, concept_id, examples)
    if detail is None:
        raise api_error(404, f"concept {concept_id} is active in no answer of this analysis")
    return detail
