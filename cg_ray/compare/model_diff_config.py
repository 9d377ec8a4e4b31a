"""Settings of `cg-ray diff-models` (CLI flags, and the Ray job's YAML, e.g. jobs/diff_models.yaml)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cg_ray.activations.config import ReaderConfig
from cg_ray.config import load_config
from cg_ray.generation.config import StageResources


class DiffModelsReader(ReaderConfig):
    """The reader's own settings plus its actor pool (as the pipeline's reader stage has)."""

    resources: StageResources = StageResources(batch_size=16)


class DiffModelsMethod(BaseModel):
    """How two models' answers are read and compared: the settings the CLI and the service share."""

    model_config = ConfigDict(extra="forbid")

    pool: Literal["mean", "max"] = Field("mean", description="pooling over the response tokens")
    threshold: float = Field(0.0, ge=0.0, description="a concept is active in an answer when its pooled s̃ > this")
    max_response_tokens: int | None = Field(None, ge=1, description="read at most this many response tokens")
    match_length: bool = Field(
        False, description="cut both answers of a prompt to the shorter one's length (characters) before reading"
    )
    confidence: float = Field(0.95, gt=0.0, lt=1.0, description="interval confidence level")
    seed: int = Field(0, description="seed of the splits of the prompts")
    min_rows: int = Field(5, ge=1, description="answers (of A or B, in a split's choosing half) a concept needs")
    top: int = Field(10, ge=0, description="hypotheses per direction one split forms and tests (its BH family)")
    # Each hypothesis is judged as every finding is (docs/findings.md): formed on one half of each split,
    # tested on the other, the splits' q-values combined by their median × 2.
    splits: int = Field(
        10, ge=2, le=50, description="splits of the prompts: each forms on one half, tests on the other"
    )
    fdr: float = Field(0.1, gt=0, lt=1, description="a hypothesis is confirmed when its q-value is at most this")
    examples: int = Field(3, ge=0, description="example prompts per hypothesis")


class DiffModelsPair(DiffModelsMethod):
    """The method plus the two models' names, as the CLI and the service both take them: with one input holding
    both models' answers, the names it gives them; with one input per model, only the names shown."""

    model_a: str | None = Field(None, description="model A (the baseline): its name in the answers of both, or a name")
    model_b: str | None = Field(None, description="model B: its name in the answers of both, or a name")


class DiffModelsConfig(DiffModelsPair):
    """The method, the models' names, and the inputs, output and reader of `cg-ray diff-models`."""

    answers: str | None = Field(None, description="one JSONL of answers with a `model` field per row")
    a: str | None = Field(None, description="model A's answers (JSONL: id, prompt, response)")
    b: str | None = Field(None, description="model B's answers (JSONL: id, prompt, response)")
    prompts: str | None = Field(None, description="prompts by id for answers without one (a benchmark JSONL)")
    turn: int = Field(1, ge=1, description="which turn of multi-turn answers to read")
    limit: int | None = Field(None, ge=2, description="read only the first N paired prompts (A's file order)")
    out: str | None = Field(None, description="output directory (published atomically)")
    reader: DiffModelsReader = DiffModelsReader()
    labels: str | None = Field(None, description="concept labels file; default: the ones shipped with the SAE")
    descriptions_from: str | None = Field(
        None, description="a run directory described by `cg-ray describe` (same reader): its sentences"
    )
    ray_address: str | None = Field(None, description="Ray cluster address; None: the job's cluster or a local one")

    @model_validator(mode="after")
    def _one_input(self) -> DiffModelsConfig:
        one_file = self.answers is not None
        two_files = self.a is not None or self.b is not None
        if one_file == two_files:
            raise ValueError("give either answers (with model_a and model_b) or a and b")
        if one_file and (self.model_a is None or self.model_b is None):
            raise ValueError("answers needs model_a and model_b")
        if two_files and (self.a is None or self.b is None):
            raise ValueError("give both a and b")
        if one_file and self.model_a == self.model_b:
            raise ValueError("model_a and model_b are the same model")
        return self

    def names(self) -> tuple[str, str]:
        if self.answers is not None:
            return str(self.model_a), str(self.model_b)
        return self.model_a or Path(str(self.a)).stem, self.model_b or Path(str(self.b)).stem


def load_diff_models_config(path: str | Path, overrides: Mapping[str, object] | None = None) -> DiffModelsConfig:
    """A YAML job config, with non-None `overrides` (CLI flags) applied on top and validated again."""
    config = load_config(DiffModelsConfig, path)
    if overrides:
        data = config.model_dump(exclude_unset=True)
        data.update({k: v for k, v in overrides.items() if v is not None})
        config = DiffModelsConfig.model_validate(data)
    return config
