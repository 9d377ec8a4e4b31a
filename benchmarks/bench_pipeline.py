"""Generation throughput: Ray Data + vLLM (ray.data.llm) against a naive one-prompt-at-a-time HF loop.

Same prompts (the embedded probe suite), greedy, same max_tokens, same run. Engine start-up is reported
separately: the steady rate is output tokens over the wall time of the vLLM engine operator in Ray Data's
own stats (which starts when the engine actor is up); end to end is reported beside it. The naive loop's
model load is excluded likewise (one warm-up prompt). Both sides use `dtype: auto` by default (float32 on a CPU without
native bf16, where bf16 is 4-8x slower). The last line printed is the steady output-tokens/s ratio.

    python benchmarks/bench_pipeline.py [--rows 128] [--max-tokens 48]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=280, help="prompts (spread over the probe kinds)")
    parser.add_argument("--max-tokens", type=int, default=64, help="as in the default job")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="known model name or local HF dir")
    parser.add_argument("--vllm-dtype", default="auto", help="vLLM's dtype (auto: resolved from the hardware)")
    parser.add_argument("--hf-dtype", default="auto", help="the naive loop's dtype (auto: as for vLLM)")
    parser.add_argument(
        "--naive-rows", type=int, default=21, help="prompts for the naive loop (its rate is per prompt)"
    )
    parser.add_argument("--max-num-seqs", type=int, default=64, help="vLLM engine sequences per step")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="cgb-", dir="/tmp"))
    env = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_CACHE_ROOT": str(scratch / "vllm"),
        "XDG_CACHE_HOME": str(scratch / "xdg"),
        "TORCH_HOME": str(scratch / "torch"),
        "VLLM_RPC_BASE_PATH": str(scratch / "rpc"),
        "TMPDIR": str(scratch / "tmp"),
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),
    }
    for sub in ("rpc", "tmp"):
        (scratch / sub).mkdir()
    os.environ.update(env)
    try:
        run(args, scratch, env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def engine_stage_seconds(stats: str) -> float:
    """Wall time of the vLLM engine operator in Ray Data's stats (it excludes the actors' start-up)."""
    match = re.search(r"MapBatches\(vLLMEngineStageUDF\).*?blocks produced in ([0-9.]+)s", stats)
    if match is None:
        raise RuntimeError(f"no vLLM engine stage in the dataset's stats:\n{stats}")
    return float(match.group(1))


def run(args: argparse.Namespace, scratch: Path, env: dict[str, str]) -> None:
    import ray

    from cg_ray.benchmarks import load_benchmarks, to_dataset
    from cg_ray.benchmarks.sources import PROBE_KINDS, ProbesSource
    from cg_ray.catalog import resolve_model
    from cg_ray.generation import generate_responses
    from cg_ray.generation.config import GenerationConfig
    from cg_ray.generation.hf import HFChatModel
    from cg_ray.generation.vllm import cpu_engine_env, generation_dtype
    from cg_ray.hardware import hardware_info

    print(f"hardware: {hardware_info().line()}")

    model_dir = str(resolve_model(args.model))
    per_kind = -(-args.rows // len(PROBE_KINDS))
    rows = load_benchmarks([ProbesSource(kind="probes", per_kind=per_kind, seed=0)])[: args.rows]
    prompts = [r["prompt"] for r in rows]
    sampling = {"max_tokens": args.max_tokens, "temperature": 0.0, "seed": 0}

    config = GenerationConfig.model_validate(
        {
            "backend": "vllm",
            "model": model_dir,
            "engine": {
                "dtype": args.vllm_dtype,
                "max_model_len": 1024,
                "gpu_memory_utilization": 0.3,
                "max_num_seqs": args.max_num_seqs,
            },
            "sampling": sampling,
            "resources": {"num_cpus": 1, "batch_size": 64},
        }
    )
    env.update(cpu_engine_env(config))  # what `cg-ray run` gives a local CPU engine
    ray.init(
        num_cpus=max(8, os.cpu_count() or 2),  # logical: vLLM's processor alone holds four actors
        include_dashboard=False,
        _temp_dir=str(scratch / "ray"),
        runtime_env={"env_vars": env},
        logging_level="WARNING",
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        t0 = time.perf_counter()
        ds = generate_responses(to_dataset(rows), config)
        out = ds.take_all()
        vllm_s = time.perf_counter() - t0
        engine_s = engine_stage_seconds(ds.stats())
    finally:
        ray.shutdown()
    vllm_tokens = sum(int(r["n_output_tokens"] or 0) for r in out)
    steady_tps = vllm_tokens / engine_s
    start_s = vllm_s - engine_s

    hf_config = GenerationConfig.model_validate(
        {"backend": "hf", "model": model_dir, "engine": {"dtype": args.hf_dtype}, "sampling": sampling}
    )
    naive = HFChatModel(model_dir, hf_config)
    naive.complete(prompts[:1])  # warm-up, like the engine's start-up run
    t0 = time.perf_counter()
    hf_tokens = 0
    naive_prompts = prompts[:: max(1, len(prompts) // args.naive_rows)][: args.naive_rows]  # every kind
    for prompt in naive_prompts:  # the naive way: one prompt at a time, full forward each step
        _, counts = naive.complete([prompt])
        hf_tokens += counts[0]
    hf_s = time.perf_counter() - t0

    hf_tps = hf_tokens / hf_s
    print(f"rows={len(prompts)} max_tokens={args.max_tokens} greedy; cpus={os.cpu_count()}")
    print(
        f"Ray Data + vLLM ({generation_dtype(config)}): {vllm_s:.1f} s end to end, {vllm_tokens} output tokens "
        f"({vllm_tokens / vllm_s:.1f} tokens/s); engine stage {engine_s:.1f} s = {steady_tps:.1f} tokens/s; "
        f"start-up and other stages {start_s:.1f} s"
    )
    print(
        f"naive HF generate loop ({naive.dtype}, batch 1): {hf_s:.1f} s, "
        f"{hf_tokens} output tokens, {hf_tps:.1f} tokens/s ({len(naive_prompts)} prompts)"
    )
    print(f"ratio (steady output tokens/s, Ray Data + vLLM / naive HF loop): {steady_tps / hf_tps:.2f}x")


if __name__ == "__main__":
    main()
