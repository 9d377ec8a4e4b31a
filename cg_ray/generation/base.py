"""The generator interface and the pieces every backend shares: which rows need generating, the output
schema, and the chat messages of a row."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from cg_ray.benchmarks.rows import BENCHMARK_ROW_SCHEMA, COLUMNS

if TYPE_CHECKING:
    import ray.data

    from cg_ray.generation.config import GenerationConfig

N_OUTPUT_TOKENS: Final = "n_output_tokens"
GENERATED_SCHEMA: Final = BENCHMARK_ROW_SCHEMA.append(pa.field(N_OUTPUT_TOKENS, pa.int64(), nullable=True))


class Generator(Protocol):
    """Takes normalized rows; returns them in ``GENERATED_SCHEMA``, with ``response`` and ``n_output_tokens``
    where a row needed an answer (``pending``: no score and no response). Rows that have an answer pass
    through unchanged, so a stage further down (the judge pass) streams every row through one backend
    rather than splitting the stream, which Ray Data can only do by running the upstream stages twice."""

    def __init__(self, config: GenerationConfig) -> None: ...

    def generate(self, ds: ray.data.Dataset) -> ray.data.Dataset: ...


class ConfiguredGenerator:
    """The state every backend keeps: the generation config it was built with (see `Generator`)."""

    def __init__(self, config: GenerationConfig) -> None:
        self.config = config


def pending_mask(batch: pa.Table) -> pa.Array:
    """True where a row needs generation: no score and no response."""
    return pc.and_(pc.is_null(batch["score"]), pc.is_null(batch["response"]))


def split_pending(*, pending: bool) -> Callable[[pa.Table], pa.Table]:
    """A batch filter: the rows that need generation (``pending``), or the others."""

    def select(batch: pa.Table) -> pa.Table:
        mask = pending_mask(batch)
        return batch.filter(mask if pending else pc.invert(mask))

    return select


def answer_pending(batch: pa.Table, answer: Callable[[pa.Table], pa.Table]) -> pa.Table:
    """``answer`` (a backend's batch function, returning ``GENERATED_SCHEMA``) on the pending rows of
    ``batch``; the other rows pass through unchanged (see `Generator`). Row order within the batch is not kept."""
    mask = pending_mask(batch)
    rest = conform(batch.filter(pc.invert(mask)))
    todo = batch.filter(mask)
    return pa.concat_tables([answer(todo), rest]) if todo.num_rows else rest


def messages(prompt: str, system_prompt: str | None) -> list[dict[str, str]]:
    out = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*out, {"role": "user", "content": prompt}]


CHARS_PER_TOKEN: Final = 4  # the estimate when no tokenizer is named (it runs low on most text: docs/explainer.md)


def estimated_tokens(prompt: str) -> int:
    """A prompt's tokens without a tokenizer: CHARS_PER_TOKEN characters a token, rounded up."""
    return -(-len(prompt) // CHARS_PER_TOKEN)


def token_counter(
    tokenizer_name: str, system_prompt: str | None = None, chat: bool = True, setting: str = "tokenizer"
) -> Callable[[str], int]:
    """prompt -> the prompt tokens of its request as a server counts them: the tokenizer of `tokenizer_name` (a
    known model, HF dir or hub id), through its chat template for a chat request (the template's own tokens
    and the system prompt included; a tokenizer without a template counts the bare prompt). One that cannot
    be loaded is a ConfigError naming `setting`."""
    from transformers import AutoTokenizer

    from cg_ray.catalog import resolve_model
    from cg_ray.errors import ConfigError

    try:
        tokenizer: Any = AutoTokenizer.from_pretrained(str(resolve_model(tokenizer_name)))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{setting} {tokenizer_name!r}: no tokenizer could be loaded ({exc})") from None
    templated = chat and getattr(tokenizer, "chat_template", None) is not None

    def count(prompt: str) -> int:
        if templated:
            ids = tokenizer.apply_chat_template(messages(prompt, system_prompt), add_generation_prompt=True)
            return len(ids["input_ids"] if isinstance(ids, Mapping) else ids)
        return len(tokenizer(prompt)["input_ids"])

    return count


def _as_list(value: Any) -> list[str] | None:
    # Ray hands list columns to row UDFs as numpy arrays.
    return None if value is None else [str(v) for v in value]


def output_row(
    row: Mapping[str, object], response: str | None, n_tokens: int | None, model: str | None = None
) -> dict[str, object]:
    """A row of ``GENERATED_SCHEMA``: the normalized columns of ``row`` plus the answer (and the model that
    gave it)."""
    out = {name: row.get(name) for name in COLUMNS}
    if model is not None:
        out["model"] = model
    out["reference"] = _as_list(out["reference"]) or []
    out["choices"] = _as_list(out["choices"])
    if response is not None:
        out["response"] = response
    out[N_OUTPUT_TOKENS] = n_tokens
    return out


def conform(batch: pa.Table) -> pa.Table:
    """A batch in ``GENERATED_SCHEMA`` (adds a null ``n_output_tokens`` to rows that skipped generation)."""
    if N_OUTPUT_TOKENS not in batch.column_names:
        batch = batch.append_column(N_OUTPUT_TOKENS, pa.nulls(batch.num_rows, pa.int64()))
    return batch.select(GENERATED_SCHEMA.names).cast(GENERATED_SCHEMA)
