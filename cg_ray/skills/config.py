"""Typed options of `cg-ray skills` and `cg-ray estimate`, validated once at the edge."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cg_ray.errors import ConfigError


class SkillsConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    n_factors: int | None = Field(default=None, ge=1, description="force K factors (else parallel analysis)")
    max_missing: float = Field(default=0.2, ge=0.0, lt=1.0, description="largest missing share per task/model")
    parallel_iterations: int = Field(default=200, ge=10, description="random matrices for parallel analysis")
    parallel_quantile: float = Field(default=0.95, gt=0.5, lt=1.0)
    bootstrap: int = Field(default=0, ge=0, description="bootstrap resamples over models for stability")
    seed: int = 0


class EstimateConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    budgets: tuple[float, ...] = Field(default=(0.01, 0.02, 0.05, 0.10, 0.25, 0.50))
    batch: int = Field(default=8, ge=1, description="rows chosen per batch")
    n_components: int = Field(default=10, ge=1, description="latent dimensions of the row prior")
    target_se: float | None = Field(default=None, gt=0.0, description="stop early once the overall SE is below")
    random_repeats: int = Field(default=5, ge=1, description="random-sampling draws per held-out model")
    noise: Literal["mle", "sample"] = Field(default="sample", description="per-row noise σ² of the PPCA prior")
    design: Literal["balanced", "greedy"] = Field(
        default="balanced", description="row order: spread over row easiness, or greedy variance reduction"
    )
    calibrate_models: int = Field(
        default=20, ge=0, description="reference models held out to calibrate the overall SE (0: the model's SE)"
    )
    oracle: bool = Field(default=False, description="--lomo: add the bound with the held-out model in the prior")
    top_concepts: int = Field(default=30, ge=1, description="concepts whose χ_model is estimated (with --concepts)")
    min_concept_rows: int = Field(default=20, ge=1, description="rows a concept must be active on to be a top one")
    max_concept_share: float = Field(default=0.25, gt=0.0, le=1.0, description="most rows a top concept is on")
    seed: int = 0

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(not 0.0 < b <= 1.0 for b in value):
            raise ConfigError(f"budgets must be fractions in (0, 1], got {list(value)}")
        return tuple(sorted(set(value)))
