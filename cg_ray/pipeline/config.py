"""The run configuration of the main job (`cg-ray run CONFIG`): one YAML file, validated once.

Relative paths inside it are relative to the working directory of the run (the project root under
``ray job submit --working-dir .``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cg_ray.activations.config import ReaderConfig
from cg_ray.benchmarks.sources import BenchmarkSource
from cg_ray.config import MetricsConfig, TextMode, base_settings, load_config, parse_config
from cg_ray.describe.config import DescribeStepConfig, ExplainConfig
from cg_ray.errors import ConfigError
from cg_ray.generation.config import GenerationConfig, StageResources


def reader_settings(config: ReaderConfig) -> ReaderConfig:
    """The reader's own settings of a config that extends them (a stage's text and actor pool dropped)."""
    return base_settings(config, ReaderConfig)


class ReaderStageConfig(ReaderConfig):
    """The reader's own settings (``cg_ray.activations.config.ReaderConfig``) plus what the pipeline
    needs to feed it: which text of a row it reads, and the resources of its actor pool."""

    text: TextMode = Field(
        "prompt",
        description="what the reader reads: the benchmark prompt (paper), the answer, or both (prompt_response, "
        "arena); `both` is a deprecated alias of prompt_response",
    )
    resources: StageResources = StageResources(batch_size=32)

    @field_validator("sae")
    @classmethod
    def _valid_sae_spec(cls, spec: str) -> str:
        from cg_ray.activations.saes.spec import parse_sae_spec

        try:
            parse_sae_spec(spec)  # syntax only: nothing is loaded
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return spec

    def reader_config(self) -> ReaderConfig:
        """What the reader actors are built from (`cg_ray.pipeline.reader_stage.ReaderStage`)."""
        return reader_settings(self)

    @classmethod
    def extending(cls, reader: ReaderConfig, text: TextMode) -> ReaderStageConfig:
        """A validated reader config read as `text`, with the stage's default actor pool. Only the fields
        `reader` had set are passed on, so the run config's explicitly set fields stay the same."""
        names = reader.model_fields_set & ReaderConfig.model_fields.keys()
        return cls(**{name: getattr(reader, name) for name in names}, text=text)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("run", pattern=r"^[A-Za-z0-9._-]+$", description="run name (used in the output directory)")
    output_dir: str = Field("runs", description="run directories are created under it")
    seed: int = 0
    benchmarks: list[BenchmarkSource] = Field(min_length=1)
    generation: GenerationConfig = GenerationConfig()
    judge: GenerationConfig | None = Field(
        None, description="model that grades rows scored by `judge`; default: the generation model"
    )
    reader: ReaderStageConfig = ReaderStageConfig()
    metrics: MetricsConfig = MetricsConfig()
    describe: DescribeStepConfig = DescribeStepConfig()
    explain: ExplainConfig | None = Field(
        None, description="LLM explanations scored by detection, after describing (`cg-ray explain`); off if unset"
    )
    ray_address: str | None = Field(None, description="Ray cluster address; None: the job's cluster or a local one")

    def judge_config(self) -> GenerationConfig:
        return self.judge or self.generation


def parse_run_config(data: object, *, source: str = "<config>") -> RunConfig:
    return parse_config(RunConfig, data, source=source)


def load_run_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML run configuration; every problem names the file and the key path."""
    return load_config(RunConfig, path)
