"""Settings of `cg-ray diff` (light: the CLI builds its flags from this model at start-up)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class DiffConfig(BaseModel):
    """Settings of a diff (CLI flags and the API's query parameters map onto these)."""

    model_config = ConfigDict(extra="forbid")

    resamples: int = Field(1000, ge=0, le=100_000, description="paired bootstrap resamples")
    seed: int = Field(0, description="seed of the bootstrap and of the held-out splits")
    confidence: float = Field(0.95, gt=0.0, lt=1.0, description="interval confidence level")
    top: int = Field(10, ge=0, description="regressed and improved concepts listed, each")
    examples: int = Field(3, ge=0, description="changed example rows per listed concept and direction")
    min_rows: int = Field(10, ge=1, description="paired rows a concept must be active in to be listed")
    rank_by: Literal["delta", "relative"] = Field(
        "delta", description="list by ΔX_model, or by its change beyond the benchmarks' mean-score change"
    )
    # The findings judged held out (cg_ray.compare.heldout_diff): as a run's (MetricsConfig's defaults).
    splits: int = Field(
        10, ge=2, le=50, description="held out: splits, each choosing on one half, testing on the other"
    )
    fdr: float = Field(0.1, gt=0, lt=1, description="held out: a change is confirmed when its q-value is at most this")
    tested_per_split: int = Field(
        10, ge=1, le=200, description="held out: changes per direction one split tests (its multiple-testing family)"
    )
    right_threshold: float = Field(0.5, ge=0.0, le=1.0, description="a row is right when its score ≥ this")
    assume_same_reader: bool = Field(False, description="accept runs whose reader is not recorded")
