"""Service settings, validated once (from serve_config.yaml args or the environment)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cg_ray.activations.config import DEFAULT_READER_FACTORY, ReaderConfig
from cg_ray.activations.saes.shipped import DEFAULT_READER, SHIPPED_READERS
from cg_ray.describe.config import ExplainConfig
from cg_ray.generation.config import GenerationConfig


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_upload_bytes: int = Field(64 << 20, ge=1, description="largest upload accepted")
    max_line_bytes: int = Field(1 << 20, ge=1, description="longest JSONL/CSV line accepted")
    max_rows: int = Field(200_000, ge=1, description="rows per upload")
    max_tokens_per_row: int = Field(4096, ge=1, description="reader tokens per row (longer: rejected)")
    max_field_chars: int = Field(
        1 << 20, ge=1, description="longest single value (id, reference, CSV cell); CSV cells also <= max_line_bytes"
    )
    max_name_chars: int = Field(200, ge=1, description="longest benchmark, upload or analysis `model` name")
    max_benchmarks: int = Field(100, ge=1, description="distinct benchmarks per upload and per analysis")
    max_uploads_per_analysis: int = Field(20, ge=1, description="upload ids per analysis (each at most once)")
    max_decoded_bytes: int = Field(
        256 << 20, ge=1, description="uncompressed size of the Parquet columns an upload decodes (zstd bombs)"
    )
    max_storage_bytes: int = Field(4 << 30, ge=1, description="stored upload bytes per API key (quota)")
    max_concurrent_analyses: int = Field(2, ge=1, description="running analyses per API key")
    max_score_rows: int = Field(64, ge=1, description="rows per synchronous /v1/score call")
    # Not a client's dimension but the service's own bound: an analysis whose task finds no CPU (the
    # replicas or other analyses hold them all) fails with the reason instead of waiting forever.
    analysis_schedule_timeout_s: float = Field(
        600.0, gt=0, le=86_400, description="how long an analysis' task may wait for a CPU before it fails"
    )

    @property
    def max_request_bytes(self) -> int:
        """Any request body: an upload plus room for the multipart envelope and form fields."""
        return self.max_upload_bytes + (64 << 10)


class ProbeSettings(BaseModel):
    """What a client's probe (POST /v1/analyses/{id}/probe) may reach: the operator's choice, not the client's.
    A request names endpoints and key variables only from these lists, since the service sends a named
    variable's value to the named endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoints: list[str] = Field(
        default_factory=list,
        description="base URLs a probe may name (writer, judge, answering model); a URL under one of them is "
        "allowed; none: a probe writes by the programmatic families and is answered by the run's model",
    )
    key_envs: list[str] = Field(
        default_factory=list, description="environment variables a probe may name as an endpoint's api_key_env"
    )
    reader_factory: str = Field(
        DEFAULT_READER_FACTORY, description='"module:attr" building the reader that checks probe items'
    )
    runner: Literal["ray_job", "process"] = Field(
        "ray_job",
        description="how a probe runs: a Ray job on the service's cluster (its dashboard at ray_address, found "
        "when None), like a large analysis; or a process of its own on the replica's host, with a private Ray",
    )


class ScopeSettings(BaseModel):
    """What a client's scope judge (POST /v1/analyses/{id}/scope with `judge`) may reach and how hard it may
    press: the operator's choice, not the client's. The scope runs inside the request, so its judge is bounded
    here (requests, concurrency, timeout, retries); with no endpoints listed a request's judge is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoints: list[str] = Field(
        default_factory=list,
        description="base URLs a scope judge may name (a URL under one of them is allowed); none: no judge",
    )
    key_envs: list[str] = Field(
        default_factory=list, description="environment variables a scope judge may name as its api_key_env"
    )
    max_judge_requests: int = Field(
        100, ge=1, description="judge requests one scope may send (each is `judge.batch` concepts); more: 422"
    )
    concurrency: int = Field(4, ge=1, le=64, description="judge requests in flight at once")
    timeout_s: float = Field(30.0, gt=0, le=600, description="per judge request")
    retries: int = Field(2, ge=0, le=10, description="retries of a failing judge request")


class SensitivitySettings(BaseModel):
    """What a client's sensitivity (POST /v1/analyses/{id}/sensitivity) may re-read an analysis' rows with:
    the operator's choice. Each reader re-reads every row of the run, in the background, on the service's
    Ray cluster (its reader pool); a run over `max_rows` is refused (run `cg-ray sensitivity` as a Ray job)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    readers: list[str] = Field(
        default_factory=lambda: [name for name in SHIPPED_READERS if name != DEFAULT_READER],
        description="the other readers a request may name (shipped names, `cg-ray sae list`); default: every "
        "shipped reader but the default",
    )
    max_rows: int = Field(
        100_000,
        ge=1,
        description="rows of the largest run the service re-reads (larger: run `cg-ray sensitivity` as a Ray job)",
    )
    reader_factory: str = Field(
        DEFAULT_READER_FACTORY,
        description='"module:attr" building the readers (tests: a stand-in); a run read by another is refused',
    )


class ServiceSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: Path = Field(Path("serve_data"), description="uploads and analysis artifacts live here")
    database_url: str | None = Field(None, description="SQLAlchemy URL; default: SQLite in data_dir")
    limits: Limits = Limits()
    cors_origins: list[str] = Field(default_factory=list, description="CORS is off unless origins are listed")
    small_analysis_rows: int = Field(
        20_000, ge=1, description="analyses up to this many rows run in the service; larger ones as Ray jobs"
    )
    reader: ReaderConfig = Field(default_factory=ReaderConfig, description="the encoder's reader and SAE")
    labels: str | None = Field(None, description="concept labels file for the reader's SAE")
    generation: GenerationConfig = Field(
        default_factory=lambda: GenerationConfig(backend="vllm", model="smollm2-135m-instruct"),
        description="the evaluated model of `generate` analyses (run as Ray jobs)",
    )
    explain: ExplainConfig | None = Field(
        None,
        description="LLM explanations in analyses run as Ray jobs (their run config's `explain:`, e.g. an "
        "OpenAI-compatible endpoint); the key, if any, is read from `api_key_env` on the cluster",
    )
    probe: ProbeSettings = ProbeSettings()
    scope: ScopeSettings = ScopeSettings()
    sensitivity: SensitivitySettings = SensitivitySettings()
    ray_address: str | None = Field(
        None, description="Ray dashboard address for job submission (e.g. http://127.0.0.1:8265); None: auto"
    )

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, data_dir: Path) -> Path:
        # Resolved once, where the settings are read: every path built from it is then absolute, so a Ray job
        # started elsewhere finds it and a client-facing message scrubs it (scrub_paths knows absolute paths).
        return data_dir.expanduser().resolve()

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'cg_ray.db').resolve()}"

    @property
    def uploads_dir(self) -> Path:
        return self.data_dir / "uploads"

    @property
    def analyses_dir(self) -> Path:
        return self.data_dir / "analyses"
