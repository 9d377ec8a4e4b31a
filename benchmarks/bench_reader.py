"""Reader throughput: our path (truncated forward, token-budget batches, `dtype: auto`, on-device pooling,
sparse transfer) against the naive reference (one row at a time, float32, full causal-LM forward with
`output_hidden_states=True`, the SAE on every token, dense vectors copied to the CPU), in one run.

`dtype: auto` is float32 on a CPU without native bf16 (then both sides run float32 and must agree within
1e-4) and bfloat16 on CPUs with AVX512_BF16 / AMX and on CUDA; our float32 path is always measured too.
Ours is the default reader: packed batches (no padding), rows sharing a prefix computing it once. For
comparison the same reader without prefix sharing and the padded path are measured as well.

    PYTHONPATH=. python benchmarks/bench_reader.py [--rows 64] [--data-dir ../shared/data] [--compile]

Texts are GSM8K questions + GPT-3 solutions from the shared data (real lengths, ~100-250 tokens; the file
holds four models' solutions per question, so each question is the prefix of four rows). Prints the
hardware and CPU capability first, this CPU's measured matmul peak, tokens/s and GFLOP/s of each path
against that peak, and, as the LAST line, the speed-up ratio. Under each path, its agreement with the naive
reference as it matters for a TopK SAE (cg_ray.activations.agreement): max |Δs̃|, the max |Δ| of the
pre-TopK activations on the tokens that count, and the shares of tokens whose top-k set and of rows whose
active latent set changed (a near-tie swapped by rounding moves s̃ by a whole activation ÷ the row's count).

`--compile` also times the default reader with `compile: true`: the compilation (its first pass over the
rows less a steady pass), the graphs dynamo made, and the steady-state tokens/s, compiled and eager passes
interleaved on the same rows, against eager and naive. For a cold compilation point TORCHINDUCTOR_CACHE_DIR
at an empty directory.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from cg_ray.activations.reader import ConceptReader


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


def matmul_peak(dtype: torch.dtype, n: int = 1536, reps: int = 8) -> float:
    """GFLOP/s of the best of `reps` square matmuls in `dtype` on this CPU, with torch's threads."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def reader_flops(base: object, seqs: list[list[int]], n_layers: int, d_sae: int, counted: float) -> float:
    """FLOPs of a truncated forward over `seqs` (each row alone) plus the SAE on the counted tokens:
    2 per weight per token in the decoder layers run, QKᵀ and AV per query over its keys, the encoder."""
    layers = base.layers[:n_layers]  # type: ignore[attr-defined]
    weights = sum(p.numel() for p in layers.parameters() if p.dim() == 2)
    cfg = base.config  # type: ignore[attr-defined]
    width = cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    tokens = sum(map(len, seqs))
    key_pairs = sum(n * (n + 1) // 2 for n in map(len, seqs))
    return 2.0 * weights * tokens + 4.0 * width * key_pairs * n_layers + 2.0 * cfg.hidden_size * d_sae * counted


def timed_compile(
    eager: ConceptReader, compiled: ConceptReader, seqs: list[list[int]], n_tokens: int
) -> tuple[str, float]:
    """The compiled reader's one-off cost and steady rate against the same reader eager, interleaved."""
    from torch._dynamo.utils import counters

    t = time.perf_counter()
    compiled.read_ids(seqs)
    first = time.perf_counter() - t
    graphs = counters["stats"]["unique_graphs"]
    times: dict[str, list[float]] = {"eager": [], "compiled": []}
    rows: dict[str, list] = {}
    for i in range(4):  # e c c e e c c e: each side as often first as second
        for name in ("eager", "compiled") if i % 2 == 0 else ("compiled", "eager"):
            t = time.perf_counter()
            rows[name] = (eager if name == "eager" else compiled).read_ids(seqs)
            times[name].append(time.perf_counter() - t)
    steady = {name: float(np.median(v)) for name, v in times.items()}
    err = max(
        float(np.abs(a.concept_acts - b.concept_acts).max(initial=0.0))
        if np.array_equal(a.concept_ids, b.concept_ids)
        else float("inf")
        for a, b in zip(rows["eager"], rows["compiled"], strict=True)
    )
    rate = {name: n_tokens / s for name, s in steady.items()}
    line = (
        f"ours   compiled (packed)  : first pass {first:.1f} s = compilation ≈ {first - steady['compiled']:.1f} s "
        f"({graphs} graph(s), {counters['stats']['calls_captured']} calls captured); steady {rate['compiled']:.0f} "
        f"vs eager {rate['eager']:.0f} tokens/s (median of 4 interleaved passes) = "
        f"{rate['compiled'] / rate['eager']:.3f}x; max |Δ| vs eager {err:.1e}"
    )
    return line, rate["compiled"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    ap.add_argument("--sae", default="default")
    ap.add_argument("--token-budget", type=lambda v: v if v == "auto" else int(v), default="auto")
    ap.add_argument("--skip-variants", action="store_true", help="only ours (auto) and naive")
    ap.add_argument("--compile", action="store_true", help="also time the default reader with compile: true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from transformers import AutoModelForCausalLM

    from cg_ray.activations.agreement import compare, row_hidden
    from cg_ray.activations.config import ReaderConfig
    from cg_ray.activations.reader import ConceptReader
    from cg_ray.activations.reference import counted_positions
    from cg_ray.activations.saes import load_sae
    from cg_ray.catalog import prepare
    from cg_ray.hardware import hardware_info

    hw = hardware_info()
    print(f"hardware: {hw.line()}")
    print(f"CPU capability (torch): {hw.cpu_capability}, native bf16: {hw.native_bf16}")
    model_dir = prepare()
    texts = load_texts(args.data_dir, args.rows)

    def reader(dtype: str, **kw: object) -> ConceptReader:
        config = {"model": str(model_dir), "sae": args.sae, "dtype": dtype, "token_budget": args.token_budget}
        return ConceptReader.from_config(ReaderConfig.model_validate({**config, "compile": False, **kw}))

    fast = reader("auto")
    auto_dtype = str(fast.dtype).removeprefix("torch.")
    seqs = fast.tokenize(texts)
    n_tokens = sum(map(len, seqs))
    print(
        f"{len(seqs)} rows, {n_tokens} tokens (mean {n_tokens / len(seqs):.0f}), "
        f"torch threads {torch.get_num_threads()}"
    )
    peak32 = matmul_peak(torch.float32)
    peak = peak32 if fast.dtype == torch.float32 else matmul_peak(fast.dtype)
    print(
        f"matmul peak (1536³, best of 8): float32 {peak32:.0f} GFLOP/s"
        + ("" if peak is peak32 else f", {auto_dtype} {peak:.0f} GFLOP/s")
    )

    # naive reference: separate float32 full model and float32 SAE
    full = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    sae32 = load_sae(args.sae)
    layer, policy = fast.layer, fast.policy

    naive_hidden: list[torch.Tensor] = []  # layer L at the counted tokens, for the pre-activation check

    def naive() -> list[np.ndarray]:
        out = []
        with torch.inference_mode():
            for seq in seqs:
                hs = full(input_ids=torch.tensor([seq]), output_hidden_states=True, use_cache=False).hidden_states
                acts = sae32.encode(hs[layer + 1][0]).cpu().numpy()  # every token, dense, to the CPU
                keep = counted_positions(seq, policy)
                out.append(acts[keep].mean(0) if keep else np.zeros(acts.shape[1], np.float32))
                naive_hidden.append(hs[layer + 1][0][keep])
        return out

    fast.read_ids(seqs[:4])  # warm-up (allocator, kernels)
    fast.stats["tokens_forward"] = fast.stats["tokens_counted"] = 0
    t = time.perf_counter()
    fast_rows = fast.read_ids(seqs)
    t_fast = time.perf_counter() - t
    forwarded, counted = fast.stats["tokens_forward"], fast.stats["tokens_counted"]
    t = time.perf_counter()
    ref = naive()
    t_naive = time.perf_counter() - t

    variants: dict[str, tuple[float, list, ConceptReader]] = {}
    names: dict[str, dict[str, object]] = {"float32 padded": {"packing": False}}
    if auto_dtype != "float32":
        names = {"float32": {}, **names}
    if not args.skip_variants:
        names = {"float32 no sharing": {"share_prefixes": False}, **names}
    for name, kw in names.items():
        other = reader("float32", **kw)
        other.read_ids(seqs[:4])
        t = time.perf_counter()
        rows = other.read_ids(seqs)
        variants[name] = (time.perf_counter() - t, rows, other)

    compiled_line = timed_compile(fast, reader("auto", compile=True), seqs, n_tokens) if args.compile else None

    def dense(rows: list) -> np.ndarray:
        m = np.zeros((len(rows), fast.d_sae), np.float64)
        for i, r in enumerate(rows):
            m[i, r.concept_ids] = r.concept_acts
        return m

    ref_m = np.stack(ref)
    flops = reader_flops(fast.model.base, seqs, fast.layer + 1, fast.d_sae, counted)
    naive_flops = reader_flops(full.model, seqs, len(full.model.layers), fast.d_sae, n_tokens)
    naive_flops += 2.0 * full.lm_head.weight.numel() * n_tokens

    def rate(secs: float, work: float, top: float) -> str:
        gflops = work / secs / 1e9
        return f"{n_tokens / secs:8.0f} tokens/s ({secs:.1f} s), {gflops:.0f} GFLOP/s = {gflops / top:.0%} of peak"

    def agreement(r: ConceptReader, rows: list) -> str:
        """Beside max |Δs̃|: pre-TopK max |Δ| and the shares of tokens / rows whose latent sets changed."""
        hidden = [h[counted_positions(seq, policy)] for h, seq in zip(row_hidden(r, seqs), seqs, strict=True)]
        return compare(dense(rows), ref_m, hidden, naive_hidden, sae32, sae32.topk_k).line()

    print(f"naive  float32            : {rate(t_naive, naive_flops, peak32)}")
    for name, (secs, rows, other) in variants.items():
        err = np.abs(dense(rows) - ref_m).max()
        print(f"ours   {name:<19}: {rate(secs, flops, peak32)}; max |Δ| vs naive {err:.2e}")
        print(f"         vs naive: {agreement(other, rows)}")
    rel = np.abs(dense(fast_rows) - ref_m).max() / np.abs(ref_m).max()
    print(f"ours   {auto_dtype + ' (default)':<19}: {rate(t_fast, flops, peak)}; max rel |Δ| vs naive {rel:.2e}")
    print(f"         vs naive: {agreement(fast, fast_rows)}")
    if compiled_line is not None:
        line, compiled_rate = compiled_line
        print(line)
        print(f"  compiled / naive: {compiled_rate / (n_tokens / t_naive):.2f}x")
    print(
        f"  ({forwarded} of {n_tokens} tokens forwarded, the rest shared prefixes; GFLOP/s count each row's "
        "truncated forward as if alone, so sharing shows as more than the hardware does)"
    )
    print(f"speed-up (ours, dtype auto = {auto_dtype} / naive float32): {t_naive / t_fast:.2f}x")


if __name__ == "__main__":
    main()
