"""Settings of `cg-ray probe RUN_DIR` (docs/probe.md), validated once where they are read (CLI, REST, YAML).

Three models take part and each is named apart: the *writer* that writes item pairs (an OpenAI-compatible
endpoint or a generation backend, as `cg-ray explain` has them; none: the programmatic families only), the
*reader* that checks an item shows its gap (the run's own by default), and the *model* that answers them
(the run's evaluated model by default; any backend of `cg_ray.generation`, the endpoint backend included).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cg_ray.activations.config import DEFAULT_READER_FACTORY, ReaderConfig
from cg_ray.describe.config import ExplainConfig
from cg_ray.generation.config import GenerationConfig

PROBE_DIR = "probe"  # under the run directory: items.parquet, results.parquet, summary.json, export/
WORK_DIR = "probe.work"  # what a killed probe resumes from; removed once the probe is published


class ProbeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gaps: list[str] = Field(
        default_factory=list, description="gap ids (mode:RANK, concept:ID); empty: the run's first `top`"
    )
    top: int = Field(
        5, ge=1, le=200, description="gaps probed when none are named: the run's first, modes before concepts"
    )
    pairs: int = Field(40, ge=5, le=5000, description="target/control pairs written per gap (before checks)")
    seed: int = 0
    fdr: float = Field(0.05, gt=0.0, lt=1.0, description="Benjamini–Hochberg level across the gaps probed")
    writer: ExplainConfig | None = Field(
        None, description="the model that writes items; None: programmatic families only"
    )
    families: Literal["fallback", "only", "never"] = Field(
        "fallback",
        description="programmatic families: where the writer cannot express a gap (fallback), instead (only), or never",
    )
    reference_check: Literal["answer", "executed", "none"] = Field(
        "answer", description="how a written reference answer is checked (families' answers are exact)"
    )
    reader_check: bool = Field(
        True, description="keep only pairs whose target shows the gap's concepts and control does not"
    )
    near_copy: float = Field(0.5, gt=0.0, le=1.0, description="n-gram containment that makes an item a near copy")
    reader: ReaderConfig | None = Field(None, description="None: the run's reader (its manifest), else the default")
    reader_factory: str = DEFAULT_READER_FACTORY
    model: GenerationConfig | None = Field(None, description="the model that answers; None: the run's evaluated model")
