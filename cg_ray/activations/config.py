"""Reader settings, validated once; `auto` values are resolved against the SAE's training metadata."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The real reader (a model + SAE); tests and benchmarks name a stand-in with the same interface.
DEFAULT_READER_FACTORY = "cg_ray.activations.reader:ConceptReader.from_config"


class ReaderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(
        default="smollm2-135m-instruct",
        description="known model name (prepared on demand), local HF directory, GGUF file, or hub id",
    )
    sae: str = Field(default="default", description="SAE spec, see cg_ray.activations.saes.spec")
    layer: int | None = Field(default=None, ge=0, description="decoder layer index; None: from the SAE's hook name")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="auto: bfloat16 on a CUDA device or a CPU with native bf16, else float32 (cg_ray.hardware)",
    )
    device: str = Field(default="auto", description="'auto' (cuda if available, else cpu), 'cpu', 'cuda', 'cuda:1'…")
    token_budget: int | Literal["auto"] = Field(
        default="auto",
        description="tokens per forward batch (packed: real tokens; padded: rows × longest); auto: resolved "
        "per device in cg_ray.activations.reader (measured fastest there)",
    )

    @field_validator("token_budget")
    @classmethod
    def _positive_budget(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("token_budget must be at least 1")
        return value

    max_tokens: int = Field(default=2048, ge=1, description="longer rows are truncated (counted in the manifest)")
    padding_side: Literal["right", "left"] = "right"
    exclude_bos: bool = Field(default=True, description="drop the BOS token from sums and lengths")
    prepend_bos: bool | Literal["auto"] = Field(
        default="auto",
        description="make sure every row starts with BOS; auto: as the SAE was trained, else no",
    )
    sink_positions: int | Literal["auto"] = Field(
        default="auto",
        description="leading positions dropped (attention sinks); auto: the SAE's seqpos_slice start",
    )
    exclude_special_tokens: bool | Literal["auto"] = Field(
        default="auto",
        description="drop the tokenizer's special tokens; auto: as the SAE was trained, else no",
    )
    sae_chunk_tokens: int = Field(default=4096, ge=1, description="tokens per SAE encode call (bounds memory)")
    compile: bool | Literal["auto"] = Field(
        default="auto",
        description="torch.compile the truncated model (dynamic shapes). auto: compile when the tokens the "
        "job will read pay for the compilation on this device (cg_ray.activations.compile_plan: a recorded "
        "compile cost and speed-up against the eager throughput measured on the first batch). Measured on "
        "one H100: Gemma-2-2B to layer 20 85k -> 137k tokens/s, Llama-3.1-8B to layer 19 45k -> 57k, after "
        "~100 s of compilation: worth it for suites of tens of millions of tokens",
    )
    packing: bool | Literal["auto"] = Field(
        default="auto",
        description="true: rows concatenated into one sequence per batch, each attending only to itself (no "
        "padding; models that cannot take a custom attention function fall back to padded batches); false: "
        "padded batches; auto: the path recorded fastest on this device kind (cg_ray.activations.path_plan: "
        "packed on the measured CPUs, padded on an H100 until the FlexAttention kernel is measured faster)",
    )
    packed_attention: Literal["auto", "sdpa", "flex"] = Field(
        default="auto",
        description="the packed batches' attention: sdpa (one call per row and layer), flex (one "
        "FlexAttention call per layer with a document mask; the only one with Gemma-2's soft-capping), "
        "auto: as packing chooses",
    )
    share_prefixes: bool = Field(
        default=True,
        description="with packing: rows starting with the same tokens (one question answered by several "
        "models) compute that prefix once",
    )
    min_shared_tokens: int = Field(default=16, ge=1, description="shortest prefix worth sharing")
