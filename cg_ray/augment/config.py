"""Settings of `cg-ray augment RUN_DIR` (docs/augment.md), validated once where they are read (CLI, YAML).

Two models take part: the *writer* that writes items (an OpenAI-compatible endpoint or a generation backend,
as `cg-ray probe` has it; its judge, when set apart, checks references) and the *reader* that must see the
targeted concept fire on an item (the run's own by default). No model answers the items: coverage is the aim.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cg_ray.activations.config import DEFAULT_READER_FACTORY, ReaderConfig
from cg_ray.describe.config import ExplainConfig

WORK_DIR = "augment.work"  # what a killed augment resumes from; removed once it is published


class AugmentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str = Field(min_length=1, description="the benchmark of the run to augment")
    reference: str | None = Field(None, description="the reference scope compared it with, where it used several")
    gaps: list[str] = Field(default_factory=list, description="in-scope gaps (concept:ID); empty: the first `top`")
    themes: list[int] = Field(
        default_factory=list,
        description="themes of uncovered rows (1 = the first confirmed theme `cg-ray scope` shows): their carrying "
        "concepts targeted, the writer shown the theme's reference rows",
    )
    top: int = Field(5, ge=1, le=500, description="gaps targeted when none are named: the most confident first")
    items: int = Field(20, ge=1, le=5000, description="items wanted per gap (before the near-copy and reader checks)")
    seed: int = 0
    writer: ExplainConfig | None = Field(None, description="the model that writes items")
    reference_check: Literal["answer", "executed", "none"] = Field(
        "answer", description="how a written reference is checked (cg_ray.probe.generators)"
    )
    reader_check: bool = Field(True, description="keep only items on which the targeted concept fires")
    near_copy: float = Field(0.5, gt=0.0, le=1.0, description="n-gram containment that makes an item a near copy")
    overdraw: float = Field(1.5, ge=1.0, le=10.0, description="writer requests per item wanted, at most")
    shown_rows: int = Field(3, ge=0, le=20, description="the benchmark's own prompts shown to the writer")
    reader: ReaderConfig | None = Field(None, description="None: the run's reader (its manifest), else the default")
    reader_factory: str = DEFAULT_READER_FACTORY
