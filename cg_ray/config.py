"""Typed configuration, validated once at the edge (CLI flags or YAML), then passed around frozen."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricsConfig(_Frozen):
    """Options of the CG metrics (ARCHITECTURE.md §2). Defaults follow the paper."""

    epsilon: float = Field(1e-5, gt=0, description="X_bench (or χ_bench) below this: concept is missing")
    coverage_mean: Literal["all", "active"] = Field(
        "all",
        description="X_bench as the mean over all benchmarks (paper eq. 3) or over active benchmarks only",
    )
    low_percentile: float = Field(10.0, ge=0, le=100, description="at or below: underrepresented")
    high_percentile: float = Field(90.0, ge=0, le=100, description="at or above: overrepresented")
    model_gap_epsilon: float = Field(1e-5, ge=0, description="X_model below this: a model gap")
    min_benchmarks: int = Field(1, ge=1, description="ranking filter: active in at least this many benchmarks")
    min_rows: int = Field(20, ge=1, description="ranking filter: active in at least this many rows")
    top_k: int = Field(50, ge=1, description="concepts listed in each best/worst ranking and weakness profile")
    rank_by: Literal["x_model", "upper_bound", "adjusted_gap"] = Field(
        "upper_bound",
        description="weakness profile order: X_model (the paper's), the upper end of its 95 percent interval, or the "
        "upper end of the difficulty-adjusted gap's interval",
    )
    duplicate_jaccard: float = Field(
        0.8, gt=0, le=1, description="weakness profile: merge concepts whose active-row sets have Jaccard ≥ this"
    )

    @model_validator(mode="after")
    def _percentiles_ordered(self) -> MetricsConfig:
        if self.low_percentile >= self.high_percentile:
            raise ValueError(
                f"low_percentile ({self.low_percentile}) must be below high_percentile ({self.high_percentile})"
            )
        return self


class RobustnessConfig(_Frozen):
    """Paper §4.2.3: repeated subsampling and adversarial ablation."""

    repeats: int = Field(100, ge=2, description="subsampling repeats")
    drop_fraction: float = Field(0.2, gt=0, lt=1, description="fraction of rows dropped per benchmark")
    seed: int = 0
    ablation_concepts: int = Field(100, ge=1, description="top/bottom concepts whose salient rows are removed")
    ablation_rows: int = Field(100, ge=1, description="most salient rows removed")
    ablation_control_repeats: int = Field(10, ge=1, description="random removals of the same size, as control")
