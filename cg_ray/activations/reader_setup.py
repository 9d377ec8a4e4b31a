"""What a reader settles before it reads a row: its layer, its token budgets and its batching path (padded, or
packed with SDPA or FlexAttention), weighed by the job's own lengths (`path_plan`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cg_ray.activations import flex, path_plan
from cg_ray.activations.config import ReaderConfig
from cg_ray.activations.model import text_config
from cg_ray.activations.tokens import plan_batches
from cg_ray.activations.varlen import KERNELS, packed_kernels, plan_groups, plan_packed_batches
from cg_ray.errors import ConfigError
from cg_ray.hardware import hardware_info

if TYPE_CHECKING:
    import torch


def resolve_layer(requested: int | None, from_sae: int | None, sae_source: str) -> int:
    if requested is None and from_sae is None:
        raise ConfigError(f"the SAE {sae_source} does not say its layer: set the reader's layer")
    if requested is not None and from_sae is not None and requested != from_sae:
        raise ConfigError(f"layer {requested} was requested but the SAE {sae_source} was trained on layer {from_sae}")
    return requested if requested is not None else int(from_sae)  # type: ignore[arg-type]


CPU_TOKEN_BUDGET = 512  # bench on 2 cores: 2.6k tokens/s at 512 vs 1.6k at 8192 (GSM8K rows, bf16)
# packed (real tokens only; attention stays per row, so a larger batch costs no attention): 1,089 tokens/s at
# 1024 vs 921 at 512 on 2 AVX2 cores (64 GSM8K rows, float32, interleaved; partly more shared prefixes, as a
# group of rows must fit one batch), 1,022 at 4096; see docs/reader.md, "Issue #26"
CPU_PACKED_BUDGET = 1024
CUDA_TOKEN_BUDGET = 8192


def resolve_token_budget(budget: int | str, device: torch.device | str, packed: bool = False) -> int:
    if isinstance(budget, int):
        return budget
    if str(device).startswith("cuda"):
        return CUDA_TOKEN_BUDGET
    return CPU_PACKED_BUDGET if packed else CPU_TOKEN_BUDGET


def softcapping(base: Any) -> bool:
    return bool(getattr(text_config(base), "attn_logit_softcapping", None))


def job_shape(seqs: Sequence[Sequence[int]], config: ReaderConfig, device: Any) -> path_plan.JobShape:
    """How each path would batch these rows: the padding share of the longest-first padded batches, the
    share of tokens shared prefixes skip, and the fill of the flex path's static packed lengths."""
    lengths = [len(s) for s in seqs]
    tokens = sum(lengths)
    padded = plan_batches(lengths, resolve_token_budget(config.token_budget, device, False))
    slots = sum(len(b) * max(lengths[i] for i in b) for b in padded)
    budget = resolve_token_budget(config.token_budget, device, True)
    groups = plan_groups(seqs, config.min_shared_tokens if config.share_prefixes else None, budget)
    forwarded = sum(g.size for g in groups)
    static = sum(flex.static_length(sum(g.size for g in b), budget) for b in plan_packed_batches(groups, budget))
    return path_plan.JobShape(
        tokens=tokens,
        padding_share=1.0 - tokens / slots if slots else 0.0,
        shared_share=1.0 - forwarded / tokens if tokens else 0.0,
        fill={"packed-sdpa": 1.0, "packed-flex": forwarded / static if static else 1.0},
    )


def choose_path(
    config: ReaderConfig, base: Any, kind: str, job: path_plan.JobShape | None = None
) -> path_plan.PathDecision:
    """The reader's batching path for this model on this device kind (see path_plan), weighed by the job's
    shares when `job` is given."""
    kernels = packed_kernels(base)
    allowed = KERNELS if config.packed_attention == "auto" else (config.packed_attention,)
    packed = {f"packed-{k}": kernels[k] for k in allowed}
    requested = str(config.packing).lower()
    if config.packed_attention != "auto":
        requested += f", packed_attention: {config.packed_attention}"
    if config.packing is False:
        candidates: dict[str, str | None] = {"padded": None}
    elif config.packing is True and any(why is None for why in packed.values()):
        candidates = packed
    else:  # auto, or packing: true on a model that cannot run packed (it falls back to padding)
        candidates = {**packed, "padded": None}
    rates = path_plan.recorded_rates(kind, hardware_info().line())
    return path_plan.choose(requested, candidates, rates, kind, job)
