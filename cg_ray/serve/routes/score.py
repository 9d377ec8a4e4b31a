"""/v1/score: concepts of a few texts, synchronously (no upload, nothing stored)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from cg_ray.serve.api_types import ScoreRequest, ScoreResponse
from cg_ray.serve.deps import Owner, ServiceDep
from cg_ray.serve.errors import api_error
from cg_ray.serve.routes import error_responses
from cg_ray.serve.score_summary import score_batch

router = APIRouter(prefix="/v1", tags=["score"], responses=error_responses(413, 422))


def check_texts(body: ScoreRequest, max_rows: int, max_chars: int) -> None:
    n = len(body.texts)
    if n > max_rows:
        raise api_error(413, f"{n} texts, over the {max_rows}-row limit of /v1/score", field="texts")
    if body.scores is not None:
        if len(body.scores) != n:
            raise api_error(422, f"{len(body.scores)} scores for {n} texts", field="scores")
        for i, s in enumerate(body.scores):
            if s is not None and not 0.0 <= s <= 1.0:
                raise api_error(422, f"score {s} is outside [0, 1]", field=f"scores.{i}")
    for i, row_text in enumerate(body.texts):
        if not row_text.strip():
            raise api_error(422, "empty text", field=f"texts.{i}")
        if len(row_text) > max_chars:
            raise api_error(413, "text over the token limit", field=f"texts.{i}")


@router.post("/score", response_model=ScoreResponse, response_model_exclude_unset=True)
async def score(service: ServiceDep, owner: Owner, body: Annotated[ScoreRequest, Body()]) -> ScoreResponse:
    del owner  # any valid key may score
    limits = service.settings.limits
    check_texts(body, limits.max_score_rows, limits.max_tokens_per_row * 8)
    encoded = await service.encoder.encode(body.texts)
    return score_batch(encoded, body.scores, body.top_k, service.encoder.d_sae, service.labels)
