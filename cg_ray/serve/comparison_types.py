"""Response and request bodies of the comparison routes: GET /v1/diff (two analyses paired by row) and
/v1/diff-models (two models' answers to the same prompts). The other routes' bodies are in `api_types.py`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from cg_ray.artifacts.contract import DiffModelsFindings
from cg_ray.compare.entries import DiffConcept
from cg_ray.compare.model_diff_config import DiffModelsPair
from cg_ray.serve.api_types import Page, _Open

# ---- diff of two analyses (GET /v1/diff); its entries are diff.json's own (cg_ray.compare.entries)


class DiffView(_Open):
    """diff.json of `cg-ray diff`, for two analyses of the caller (a = baseline, b = compared)."""

    format_version: int
    kind: str
    runs: dict[str, Any]
    counts: dict[str, Any]
    config: dict[str, Any]
    heldout: dict[str, Any] | None = Field(
        None, description="the findings: changes beyond their benchmark judged on rows that did not choose them"
    )
    top_regressed: list[DiffConcept]
    top_improved: list[DiffConcept]


# ---- diff-models: two models' answers to the same prompts (POST /v1/diff-models)


class DiffModelsRequest(DiffModelsPair):
    """Either one upload holding both models' answers, its `benchmark` field naming the model (upload it with
    the mapping {"benchmark": "model"}), with `model_a` and `model_b`; or one upload per model (`upload_a`,
    `upload_b`; `model_a` / `model_b` then only name them). Rows are paired by id."""

    upload_id: str | None = Field(None, description="one upload of both models' answers (benchmark = model)")
    upload_a: str | None = Field(None, description="model A's answers (rows: id, prompt, response)")
    upload_b: str | None = Field(None, description="model B's answers (rows: id, prompt, response)")


class DiffModelsConcept(_Open):
    """One row of diff_models.parquet: a concept active in an answer of A or B (non-finite numbers as null)."""

    concept_id: int
    label: str | None
    description: str | None
    frac_a: float | None = Field(description="share of A's answers where the concept is active")
    frac_b: float | None
    delta: float | None = Field(description="frac_b - frac_a")
    delta_low: float | None
    delta_high: float | None
    hypothesis: str | None = Field(description="a_more / b_more when some split formed it as a hypothesis")
    heldout_delta: float | None = Field(None, description="Δ on the prompts that did not form it (median split)")
    heldout_low: float | None = None
    heldout_high: float | None = None
    q_value: float | None = None
    confirmed: bool | None = Field(
        None, description="a hypothesis' verdict (q ≤ fdr); null for other concepts and older analyses"
    )


class DiffModelsView(Page[DiffModelsConcept], DiffModelsFindings):
    """A diff-models analysis: hypotheses.json's findings, and a page of its concepts."""

    id: str
    method: str


class DiffModelsDocument(DiffModelsFindings):
    """A diff-models analysis as the explorer draws it (cg_ray.report.comparisons.model_diff_view): the
    document its diff_models.html embeds."""

    name: str
    method: str
    concepts: dict[str, list[Any]] = Field(description="diff_models.parquet column by column (non-finite as null)")


class DiffModelsConceptDetail(DiffModelsConcept):
    examples: dict[str, list[dict[str, Any]]] = Field(
        description="a_more / b_more: prompts where the concept is in that model's answer and not the other's "
        "(then where it is in both), most active first, with the prompt and both answers"
    )
