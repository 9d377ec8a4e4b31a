"""The settings of `cg-ray sensitivity`, validated once."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cg_ray.activations.config import DEFAULT_READER_FACTORY
from cg_ray.generation.config import StageResources


class SensitivityConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run: Path = Field(description="the run directory whose rows are re-read")
    readers: tuple[str, ...] = Field(min_length=1, description="other readers: shipped names (cg-ray sae list)")
    reader_factory: str = Field(DEFAULT_READER_FACTORY, description="module:attr building a reader (tests: a fake)")
    resources: StageResources = Field(
        StageResources(num_cpus=0.25, batch_size=32, memory_gib=1.5),
        description="the reader actor pool (Ray Data; a CPU reader actor holds ~1.4 GiB)",
    )
    ray_address: str | None = Field(None, description="join this Ray cluster (else RAY_ADDRESS or a local one)")
    fresh: bool = Field(False, description="re-read every reader, even one whose run is already there")
    top_concepts: int = Field(10, ge=1, description="weakest concepts whose rows the reader pairs compare")

    @field_validator("readers")
    @classmethod
    def _distinct(cls, readers: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(readers)) != len(readers):
            raise ValueError(f"a reader is named twice: {', '.join(readers)}")
        if bad := [r for r in readers if not r or "/" in r or r.startswith(".")]:
            raise ValueError(f"not a reader name: {bad[0]!r} (a shipped reader's name, see `cg-ray sae list`)")
        return readers
