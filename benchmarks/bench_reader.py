"""Reader throughput: our path (truncated forward, token-budget batches, `dtype: auto`, on-device pooling,
sparse transfer) against the naive reference (one row at a time, float32, full causal-LM forward with
`output_hidden_states=True`, the SAE on every token, dense vectors copied to the CPU), in one run.

`dtype: auto` is float32 on a CPU without native bf16 (then both sides run float32 and must agree within
1e-4) and bfloat16 on CPUs with AVX512_BF16 / AMX and on CUDA; our float32 path is always measured too.

    PYTHONPATH=. python benchmarks/bench_reader.py [--rows 64] [--data-dir ../shared/data]

Texts are GSM8K questions + GPT-3 solutions from the shared data (real lengths, ~100-250 tokens).
Prints the hardware and dtype first, tokens/s of each path, and, as the LAST line, the speed-up ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch


def load_texts(data_dir: Path, n: int) -> list[str]:
    prompts = {}
    with (data_dir / "benchmarks" / "gsm8k.jsonl").open() as fh:
        for line in fh:
            r = json.loads(line)
            prompts[r["id"]] = r["prompt"]
    texts = []
    with (data_dir / "model_outputs" / "gsm8k_gpt3_solutions.jsonl").open() as fh:
        for line in fh:
            r = json.loads(line)
            if r["id"] in prompts and isinstance(r.get("output"), str):
                texts.append(prompts[r["id"]] + "\n\n" + r["output"])
            if len(texts) == n:
                break
    return texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    ap.add_argument("--sae", default="default")
    ap.add_argument("--token-budget", type=lambda v: v if v == "auto" else int(v), default="auto")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from transformers import AutoModelForCausalLM

    from cg_ray.activations.config import ReaderConfig
    from cg_ray.activations.reader import ConceptReader
    from cg_ray.activations.reference import counted_positions
    from cg_ray.activations.saes import load_sae
    from cg_ray.catalog import prepare
    from cg_ray.hardware import hardware_info

    print(f"hardware: {hardware_info().line()}")
    model_dir = prepare()
    texts = load_texts(args.data_dir, args.rows)
    fast = ConceptReader.from_config(
        ReaderConfig.model_validate(
            {"model": str(model_dir), "sae": args.sae, "dtype": "auto", "token_budget": args.token_budget}
        )
    )
    auto_dtype = str(fast.dtype).removeprefix("torch.")
    seqs = fast.tokenize(texts)
    n_tokens = sum(map(len, seqs))
    print(
        f"{len(seqs)} rows, {n_tokens} tokens (mean {n_tokens / len(seqs):.0f}), "
        f"torch threads {torch.get_num_threads()}"
    )

    # naive reference: separate float32 full model and float32 SAE
    full = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    sae32 = load_sae(args.sae)
    layer, policy = fast.layer, fast.policy

    def naive() -> list[np.ndarray]:
        out = []
        with torch.inference_mode():
            for seq in seqs:
                hs = full(input_ids=torch.tensor([seq]), output_hidden_states=True, use_cache=False).hidden_states
                acts = sae32.encode(hs[layer + 1][0]).cpu().numpy()  # every token, dense, to the CPU
                keep = counted_positions(seq, policy)
                out.append(acts[keep].mean(0) if keep else np.zeros(acts.shape[1], np.float32))
        return out

    fast.read_ids(seqs[:4])  # warm-up (allocator, kernels)
    t = time.perf_counter()
    fast_rows = fast.read_ids(seqs)
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    ref = naive()
    t_naive = time.perf_counter() - t

    fast32 = ConceptReader.from_config(
        ReaderConfig.model_validate({"model": str(model_dir), "sae": args.sae, "dtype": "float32"})
    )
    t = time.perf_counter()
    f32_rows = fast32.read_ids(seqs)
    t_f32 = time.perf_counter() - t

    def dense(rows: list) -> np.ndarray:  # type: ignore[type-arg]
        m = np.zeros((len(rows), fast.d_sae), np.float64)
        for i, r in enumerate(rows):
            m[i, r.concept_ids] = r.concept_acts
        return m

    err32 = np.abs(dense(f32_rows) - np.stack(ref)).max()
    rel16 = np.abs(dense(fast_rows) - np.stack(ref)).max() / np.abs(np.stack(ref)).max()
    print(f"naive  float32 : {n_tokens / t_naive:8.0f} tokens/s ({t_naive:.1f} s)")
    print(f"ours   float32 : {n_tokens / t_f32:8.0f} tokens/s ({t_f32:.1f} s)  max |Δ| vs naive {err32:.2e}")
    print(
        f"ours   {auto_dtype:<8}: {n_tokens / t_fast:8.0f} tokens/s ({t_fast:.1f} s)  max rel |Δ| vs naive {rel16:.2e}"
    )
    print(f"speed-up (ours, dtype auto = {auto_dtype} / naive float32): {t_naive / t_fast:.2f}x")


if __name__ == "__main__":
    main()
