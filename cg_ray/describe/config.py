"""Settings of `cg-ray describe` / `cg-ray explain` that a run config can carry (`describe:`, `explain:`).

Kept apart from the heavy modules so that the run config validates them without importing them.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

# Concepts per ranking table of the report; the run's describe step describes as many, so that every
# concept the report lists reads as a sentence.
REPORT_TOP: Final = 20


class DescribeStepConfig(BaseModel):
    """`cg-ray run` describes the run's weak / under-covered concepts after publishing it (on by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    top: int = Field(REPORT_TOP, ge=1, description="worst-by-X_model and least-covered concepts, each")
    examples: int = Field(5, ge=1, description="top rows per concept")
    tokens: bool = Field(True, description="re-read the top rows token by token to mark the activating span")


class ExplainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "smollm2-135m-instruct"
    backend: str = Field("vllm", description="generation backend: vllm | hf | fake")
    dtype: Literal["float32", "bfloat16", "auto"] = "auto"  # resolved from the hardware (cg_ray.hardware)
    n_examples: int = Field(5, ge=1)
    n_detect: int = Field(6, ge=1, description="held-out rows per class (with / without the concept)")
    seed: int = 0
    explain_tokens: int = Field(60, ge=8)
    detect_tokens: int = Field(24, ge=2, description="room for a fenced JSON answer")
    name_themes: bool = Field(False, description="let the model name the themes (else enrichment / descriptions)")
