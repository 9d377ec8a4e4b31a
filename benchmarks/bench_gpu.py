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
`output_hidden_states=True`; the reader's weights, eager attention where the model soft-caps its logits),
the SAE in float32 on every token, dense vectors copied to the CPU.

Suites: "uniform" (lengths uniform in 128-512), "skewed" (log-uniform in 20-2,000, as benchmark mixes
are: many short rows, a long tail) and "shared" (8 answers of 20-300 tokens after one 500-token question),
each printed with the padding share of the padded batches the reader would make and the share of tokens
shared prefixes skip (what packing can win back). Paths (`--paths`): `auto` (what `packing: auto` picks
here, weighing the recorded kernel rates by the suite's shares), `padded`, `packed-sdpa` (SDPA per row),
`packed-flex` (FlexAttention, masks built before the forward, one static packed length). Each reader is
warmed up on one batch of every forward shape it will meet (every packed length × window kind) before
the timed pass, which reports the graphs compiled during it (must be 0) and the mask-build ms per batch.
A path the model cannot run is reported as skipped. Agreement (agreement.py) on the suite's first rows,
against the naive way in float32 and, where the reader's dtype is not float32, against the naive way in
that dtype, with the naive way's own dtype noise (same dtype vs float32) beside it: max |Δs̃| and
pre-activation max |Δ|, each also relative to the largest value, and the share of rows whose active
latent set changed — dtype noise reads as the noise floor, a fault as far above it. `--record` keeps the
explicit paths' kernel rates (slots/s, padding included; Llama, uniform suite) as this machine's
`packing: auto` figures.

    python benchmarks/bench_gpu.py --skip-vllm --json bench.json                 # eager, every path
    python benchmarks/bench_gpu.py --skip-vllm --compile true --paths auto,padded,packed-flex
    python benchmarks/bench_gpu.py --tiny --skip-vllm --paths padded,packed-flex --compile true   # CPU

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

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from benchmarks.gpu_models import (
    LLAMA31_8B,
    PEAK_BF16_TFLOPS,
    TINY,
    Setup,
    block_params,
    flops_per_token,
    hf_config,
    random_model,
    random_sae,
    setups,
    shared_prefix_rows,
    skewed_rows,
    token_rows,
)


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


# --paths: what each measured reader path sets in ReaderConfig
PATHS: dict[str, dict[str, Any]] = {
    "auto": {"packing": "auto"},
    "padded": {"packing": False},
    "packed-sdpa": {"packing": True, "packed_attention": "sdpa"},
    "packed-flex": {"packing": True, "packed_attention": "flex"},
}


@dataclass
class Naive:
    """The naive way on a suite's first rows: its rate, dense s̃ and layer-L hidden states (every token);
    `same` the same in the reader's dtype when that is not float32 (else None)."""

    tokens_per_s: float
    s: np.ndarray
    hidden: list[torch.Tensor]
    same: Naive | None = None


def fake_tokenizer(a: dict[str, Any]) -> SimpleNamespace:
    return SimpleNamespace(  # the reader needs only these ids from a tokenizer when given token ids
        bos_token_id=a["bos_token_id"], pad_token_id=a["pad_token_id"], eos_token_id=a["eos_token_id"],
        all_special_ids=[a["pad_token_id"], a["eos_token_id"], a["bos_token_id"]],
    )  # fmt: skip


def calibrated_sae(setup: Setup, base: Any, rows: list[list[int]], device: torch.device) -> Any:
    """A fresh random SAE calibrated on the hooked layer's real activations (the same one every call)."""
    from cg_ray.activations.model import LayerCapture, decoder_layers, forward_to_layer

    capture = LayerCapture(decoder_layers(base)[setup.layer])
    calib = torch.tensor([r[:64] for r in rows[:16] if len(r) >= 64] or [rows[0]], device=device)
    hidden = forward_to_layer(base, capture, calib, torch.ones_like(calib))
    capture.remove()
    return random_sae(setup, setup.arch["hidden_size"], hidden.reshape(-1, setup.arch["hidden_size"]))


def bench_path(
    setup: Setup, path: str, rows: list[list[int]], naive: Naive, device: torch.device, args: argparse.Namespace
) -> dict[str, Any]:
    """One reader path over one suite's rows: tokens/s, and agreement with the naive way on its rows."""
    from cg_ray.activations.agreement import compare, row_hidden
    from cg_ray.activations.config import ReaderConfig
    from cg_ray.activations.model import LoadedModel
    from cg_ray.activations.reader import ConceptReader
    from cg_ray.hardware import resolve_dtype

    dtype_name = resolve_dtype("auto", device)
    a = setup.arch
    base = random_model(a, getattr(torch, dtype_name), device, lm_head=False)
    sae = calibrated_sae(setup, base, rows, device)
    cmp_sae = calibrated_sae(setup, base, rows, device).to(device, torch.float32)  # as the naive way's
    loaded = LoadedModel(base, fake_tokenizer(a), f"random {setup.name}", a["hidden_size"], a["num_hidden_layers"])
    config = ReaderConfig.model_validate(
        {
            "model": "random", "sae": "random", "dtype": dtype_name, "device": str(device),
            "token_budget": args.token_budget, "prepend_bos": False, "sink_positions": 0,
            "exclude_special_tokens": False, "compile": COMPILE[args.compile], **PATHS[path],
        }
    )  # fmt: skip
    from cg_ray.activations import flex

    torch._dynamo.reset()  # this reader's compiles only (and dynamo's recompile limit counted afresh)
    reader = ConceptReader(loaded, sae, config, setup.layer)
    reader.plan(sum(map(len, rows)) * 2)  # `compile: auto` decides for the warm-up and the measured pass
    warm = warmup_rows(reader, rows)
    t = time.perf_counter()
    reader.read_ids(warm)  # warm-up: every forward shape (and compiling), `packing: auto` weighed on it
    warmup_s = time.perf_counter() - t
    ran = reader.path_decision.path
    if path != "auto" and ran != path:
        return {"path": path, "skipped": reader.path_decision.reason}
    before = {k: reader.stats[k] for k in ("mask_seconds", "mask_batches", "slots")}
    graphs = flex.graphs_compiled()
    sync(device)
    t = time.perf_counter()
    out = reader.read_ids(rows)
    sync(device)
    seconds = time.perf_counter() - t
    compiles = flex.graphs_compiled() - graphs
    masks = reader.stats["mask_batches"] - before["mask_batches"]
    mask_ms = 1e3 * (reader.stats["mask_seconds"] - before["mask_seconds"]) / masks if masks else None
    slots = reader.stats["slots"] - before["slots"]
    n_tokens = sum(map(len, rows))
    few = rows[: len(naive.hidden)]
    ours = dense(reader.read_ids(few), setup.d_sae)
    hidden = row_hidden(reader, few)
    agree = compare(ours, naive.s, hidden, naive.hidden, cmp_sae, None)
    same = None if naive.same is None else compare(ours, naive.same.s, hidden, naive.same.hidden, cmp_sae, None)
    noise = (
        None if naive.same is None else compare(naive.same.s, naive.s, naive.same.hidden, naive.hidden, cmp_sae, None)
    )
    described = reader.describe()
    reader.capture.remove()
    del reader, base
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {
        "path": path, "ran": ran, "dtype": dtype_name, "packing_decision": described["packing_decision"]["reason"],
        "packing_fallback": described["packing_fallback"], "tokens": n_tokens,
        "tokens_per_s": round(n_tokens / seconds), "slots_per_s": round(slots / seconds),
        "compiled": described["compiled"], "compile_decision": described["compile_decision"],
        "warmup_rows": len(warm), "warmup_s": round(warmup_s, 1), "compiles_in_timed_pass": compiles,
        "mask_build_ms_per_batch": None if mask_ms is None else round(mask_ms, 3),
        "pooled_latents_per_row": round(sum(len(r.concept_ids) for r in out) / len(out), 1),
        "vs_naive": agree.line(), "max_abs_s": agree.max_abs_s, "max_abs_pre": agree.max_abs_pre,
        "rel_s": agree.rel_s, "rel_pre": agree.rel_pre, "rows_support_changed": agree.rows_support_changed,
        "vs_naive_same_dtype": None if same is None else same.line(),
        "naive_dtype_noise": None if noise is None else noise.line(),
    }  # fmt: skip


def warmup_rows(reader: Any, rows: list[list[int]]) -> list[list[int]]:
    """The rows of one batch per forward shape the reader will meet on `rows` (packed: each static length,
    which covers every window kind, as all of a model's masks are built per batch; padded, dynamic shapes:
    enough (rows, width) pairs for the dynamic graph), so that nothing compiles during the timed pass
    (which counts what does)."""
    from cg_ray.activations import flex
    from cg_ray.activations.tokens import plan_batches
    from cg_ray.activations.varlen import plan_groups, plan_packed_batches

    reader.weigh(rows)  # `packing: auto`: the path it takes on these rows
    if not reader.compiled and reader.kernel != "flex" and reader.config.compile is False:
        return rows[: max(2, len(rows) // 16)]  # eager, nothing compiles: a short warm-up
    shapes: dict[Any, list[int]] = {}
    if reader.packed:
        shared = reader.config.min_shared_tokens if reader.config.share_prefixes else None
        budget = reader.token_budget
        for batch in plan_packed_batches(plan_groups(rows, shared, budget), budget):
            size = sum(g.size for g in batch)
            key = flex.static_length(size, budget) if reader.kernel == "flex" else size
            shapes.setdefault(key, [i for g in batch for i in g.rows])
    else:  # dynamic shapes (compile: true pads widths to 64): the first two shapes make the graph dynamic;
        m = reader.pad_multiple  # a one-row batch and the last (narrowest) one may specialise: them too
        for batch in plan_batches([len(r) for r in rows], reader.token_budget):
            width = -(-max(len(rows[i]) for i in batch) // m) * m
            shapes.setdefault((len(batch), width), batch)
        keys = list(shapes)
        keep = {*keys[:2], keys[-1], *[k for k in keys if k[0] == 1][:1]}
        shapes = {k: shapes[k] for k in keys if k in keep}
    return [rows[i] for b in shapes.values() for i in b]


def dense(rows: list[Any], d_sae: int) -> np.ndarray:
    m = np.zeros((len(rows), d_sae), np.float64)
    for i, r in enumerate(rows):
        m[i, r.concept_ids] = r.concept_acts
    return m


def naive_reader(
    setup: Setup, device: torch.device, rows: list[list[int]], calibration: list[list[int]], dtype: torch.dtype
) -> Naive:
    """One row at a time, full causal LM + LM head in `dtype`, the SAE on every token (float32, or `dtype`
    when that is not float32: the naive way in the reader's own dtype), dense copy to the CPU; the weights
    are the reader's (the same seed, copied into the causal LM)."""
    base = random_model(setup.arch, dtype, device, lm_head=False)
    sae32 = calibrated_sae(setup, base, calibration, device).to(device, torch.float32)  # the reader's SAE
    sae_dtype = dtype if dtype != torch.float32 else torch.float32
    full = random_model(setup.arch, dtype, device, lm_head=True)
    full.model.load_state_dict(base.state_dict())
    if setup.arch.get("attn_logit_softcapping"):  # transformers' SDPA would drop Gemma-2's soft-capping
        full.set_attn_implementation("eager")
    del base
    out, hidden = [], []
    with torch.inference_mode():
        full(input_ids=torch.tensor([rows[0]], device=device), use_cache=False)  # warm-up
        sync(device)
        t = time.perf_counter()
        for seq in rows:
            hs = full(input_ids=torch.tensor([seq], device=device), output_hidden_states=True, use_cache=False)
            h = hs.hidden_states[setup.layer + 1][0]
            out.append(sae32.encode(h.to(sae_dtype)).float().cpu().numpy().mean(0))
            hidden.append(h.float().cpu())
        sync(device)
        seconds = time.perf_counter() - t
    del full
    return Naive(sum(map(len, rows)) / seconds, np.stack(out).astype(np.float64), hidden)


def bench_setup(setup: Setup, device: torch.device, args: argparse.Namespace, peaks: dict[str, Any]) -> list[dict]:
    """Every suite × path of one setup, each beside the naive way on the suite's first rows."""
    a = setup.arch
    params = block_params(random_model(a, torch.float32, torch.device("meta"), lm_head=False), setup.layer)
    suites = {
        "uniform": token_rows(a["vocab_size"], args.rows, args.min_len, args.max_len, seed=0),
        "skewed": skewed_rows(a["vocab_size"], args.rows, args.skew_min, args.skew_max, seed=2),
        "shared": shared_prefix_rows(a["vocab_size"], args.rows, args.question, 8, *args.answer, seed=3),
    }
    from cg_ray.activations.config import ReaderConfig
    from cg_ray.activations.reader import job_shape
    from cg_ray.hardware import resolve_dtype

    dtype = getattr(torch, resolve_dtype("auto", device))
    results = []
    for suite, rows in suites.items():
        few = rows[: args.naive_rows]
        naive = naive_reader(setup, device, few, rows, torch.float32)
        if dtype != torch.float32:  # the naive way in the reader's dtype: the dtype's own noise floor
            naive.same = naive_reader(setup, device, few, rows, dtype)
        config = ReaderConfig.model_validate({"model": "random", "token_budget": args.token_budget})
        shape = job_shape(rows, config, device)
        flops = flops_per_token(setup, params, sum(map(len, rows)) / len(rows))
        for path in args.paths:
            r = {
                "setup": setup.name, "suite": suite, "rows": len(rows), "padding_share": round(shape.padding_share, 4),
                "shared_share": round(shape.shared_share, 4), "flex_fill": round(shape.fill["packed-flex"], 4),
            }  # fmt: skip
            r |= bench_path(setup, path, rows, naive, device, args)
            r["naive_tokens_per_s"] = round(naive.tokens_per_s)
            if "skipped" not in r:
                r["gflops_per_token"] = round(flops / 1e9, 3)
                r["achieved_tflops"] = round(flops * r["tokens_per_s"] / 1e12, 1)
                r["speedup_vs_naive"] = round(r["tokens_per_s"] / naive.tokens_per_s, 2)
                for name, peak in peaks.items():
                    if peak:
                        r[f"roofline_fraction_{name}"] = round(r["achieved_tflops"] / peak, 3)
            results.append(r)
            print(result_line(r), flush=True)
    return results


def result_line(r: dict[str, Any]) -> str:
    head = f"reader {r['setup']} {r['suite']} [{r['path']}]"
    if "skipped" in r:
        return f"{head}: skipped ({r['skipped']})"
    roof = ", ".join(
        f"{k.removeprefix('roofline_fraction_')} {v:.0%}" for k, v in r.items() if k.startswith("roofline")
    )
    masks = r["mask_build_ms_per_batch"]
    fallback = f"\n    FELL BACK: {r['packing_fallback']}" if r["packing_fallback"] else ""
    same = f"\n    vs naive {r['dtype']}: {r['vs_naive_same_dtype']}" if r["vs_naive_same_dtype"] else ""
    noise = f"\n    naive {r['dtype']} vs naive float32: {r['naive_dtype_noise']}" if r["naive_dtype_noise"] else ""
    return (
        f"{head} -> {r['ran']}{', compiled' if r['compiled'] else ''}: {r['tokens_per_s']:,} tokens/s over "
        f"{r['tokens']:,} tokens ({r['achieved_tflops']} TFLOP/s{'; roofline ' + roof if roof else ''}); padded "
        f"batches {r['padding_share']:.1%} padding, shared prefixes {r['shared_share']:.1%}; naive "
        f"{r['naive_tokens_per_s']:,} tokens/s; {r['pooled_latents_per_row']} latents per row; warm-up "
        f"{r['warmup_rows']} rows {r['warmup_s']} s; compiles in the timed pass: {r['compiles_in_timed_pass']}"
        f"{'' if masks is None else f'; masks {masks:.2f} ms per batch'}{fallback}"
        f"\n    vs naive float32: {r['vs_naive']}{same}{noise}"
    )


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
    ap.add_argument(
        "--paths",
        type=lambda v: v.split(","),
        default=list(PATHS),
        help=f"reader paths, comma-separated ({', '.join(PATHS)})",
    )
    ap.add_argument("--skew-min", type=int, default=None, help="skewed suite: shortest row (log-uniform lengths)")
    ap.add_argument("--skew-max", type=int, default=None, help="skewed suite: longest row")
    ap.add_argument("--question", type=int, default=None, help="shared suite: the question's tokens")
    ap.add_argument(
        "--compile-backend",
        default="inductor",
        help="torch.compile backend of the reader (aot_eager / eager: count graphs without inductor)",
    )
    ap.add_argument(
        "--record", action="store_true", help="keep the measured path rates for this machine's packing: auto"
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    on_gpu = torch.cuda.is_available()
    small = args.tiny or not on_gpu
    args.rows = args.rows or (48 if small else 4096)
    args.naive_rows = args.naive_rows or (8 if small else 64)
    args.min_len = args.min_len or (16 if small else 128)
    args.max_len = args.max_len or (64 if small else 512)
    args.token_budget = args.token_budget or (512 if small else 65_536)
    args.skew_min = args.skew_min or (4 if small else 20)
    args.skew_max = args.skew_max or (200 if small else 2_000)
    args.question = args.question or (40 if small else 500)
    args.answer = (4, 40) if small else (20, 300)
    if unknown := set(args.paths) - set(PATHS):
        ap.error(f"unknown --paths {sorted(unknown)} (known: {', '.join(PATHS)})")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CACHE_ROOT", tempfile.mkdtemp(prefix="cg-bench-vllm-cache-"))

    from cg_ray.activations import flex
    from cg_ray.hardware import hardware_info

    flex.SETTINGS.backend = args.compile_backend
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
        results["reader"] += bench_setup(setup, device, args, peaks)
    if args.record:
        record(results["reader"], info.line(), device)
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
    first = next(r for r in results["reader"] if "skipped" not in r)
    which = f"{first['setup']} {first['suite']} [{first['path']}]"
    print(f"speed-up (reader {which}, ours / naive): {first['speedup_vs_naive']:.2f}x")


def record(results: list[dict[str, Any]], machine: str, device: torch.device) -> None:
    """The explicit paths' kernel rates (slots/s, padding included) on the last setup's uniform suite (the
    built-in figures' setup, Llama-3.1-8B) become this machine's figures for `packing: auto`."""
    from cg_ray.activations import path_plan
    from cg_ray.activations.compile_plan import device_kind

    last = results[-1]["setup"]
    for r in results:
        if r["setup"] == last and r["suite"] == "uniform" and r["path"] in path_plan.PATHS and "skipped" not in r:
            source = f"bench_gpu.py on {machine}, {last}, uniform suite: {r['tokens_per_s']:,} tokens/s"
            path_plan.record_rate(device_kind(device), machine, r["path"], path_plan.PathRate(r["slots_per_s"], source))
            print(f"recorded {r['path']}: {r['slots_per_s']:,} slots/s for packing: auto on this machine")


if __name__ == "__main__":
    main()
