"""Agreement between two reads of the same rows that means something for TopK SAEs (issue #33).

A max |Δs̃| alone misleads for a TopK SAE: a float32 rounding difference of 1e-6 in the residual stream
can swap the k-th and (k+1)-th latent of a token whose two pre-activations nearly tie, and the row's s̃
then differs by that latent's whole activation ÷ the row's token count (~1e-2), though both reads are
equally right. So beside it we report the max |Δ| of the pre-TopK (pre-activation) values on the tokens
that count, the share of those tokens whose top-k latent set differs, and the share of rows whose active
latent set (the s̃ support) differs. Used by benchmarks/bench_reader.py and benchmarks/bench_gpu.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from cg_ray.activations.model import forward_to_layer
from cg_ray.activations.tokens import pad, plan_batches
from cg_ray.activations.varlen import pack, plan_groups, plan_packed_batches

if TYPE_CHECKING:
    from cg_ray.activations.reader import ConceptReader


@torch.no_grad()  # not inference mode: the inputs it makes are then those of reading (one compiled graph)
def row_hidden(reader: ConceptReader, seqs: Sequence[Sequence[int]]) -> list[torch.Tensor]:
    """Layer L's output for every token of every row, (n_i, d) float32 on the CPU, computed in the very
    batches (packed or padded, the same kernel) that `reader.read_ids(seqs)` uses."""
    out: list[torch.Tensor | None] = [None] * len(seqs)
    base, capture, device = reader.model.base, reader.capture, reader.device
    if reader.packed:
        min_shared = reader.config.min_shared_tokens if reader.config.share_prefixes else None
        groups = plan_groups(seqs, min_shared, reader.token_budget)
        for group_batch in plan_packed_batches(groups, reader.token_budget):
            packed = pack(seqs, group_batch)
            hidden = reader.packed_hidden(packed)  # the reader's own kernel and masks
            for r, tokens in zip(packed.rows, packed.row_tokens, strict=True):
                out[r] = hidden[tokens.to(device)].float().cpu()
        return [h for h in out if h is not None]
    for batch in plan_batches([len(s) for s in seqs], reader.token_budget):
        ids, mask = pad([seqs[i] for i in batch], reader.policy.pad_id, reader.config.padding_side, reader.pad_multiple)
        hidden = forward_to_layer(base, capture, ids.to(device), mask.to(device))
        for j, r in enumerate(batch):
            out[r] = hidden[j, mask[j].bool().to(device)].float().cpu()
    return [h for h in out if h is not None]


def pre_activations(sae: Any, x: torch.Tensor) -> torch.Tensor:
    """The SAE's pre-activation values (before TopK / ReLU / the JumpReLU threshold), float32."""
    inner = getattr(sae, "sae", None)  # sae-lens backends wrap the sae-lens SAE
    if inner is not None:
        x = x.to(inner.W_enc.device, inner.W_enc.dtype)
        pre = inner.process_sae_in(x) @ inner.W_enc + inner.b_enc
        if getattr(inner.cfg, "rescale_acts_by_decoder_norm", False):
            pre = pre * inner.W_dec.norm(dim=-1)
        result: torch.Tensor = pre.float()
        return result
    pre_fn = getattr(sae, "_pre", None)  # DenseSae
    if pre_fn is None:
        raise TypeError(f"cannot compute pre-activations of {type(sae).__name__}")
    return pre_fn(x.to(sae.W_enc.device, sae.W_enc.dtype)).float()  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Agreement:
    max_abs_s: float  # max |Δs̃| over rows and latents (dense)
    max_abs_pre: float  # max |Δ| of the pre-activations on the tokens that count
    tokens_topk_changed: float | None  # share of counted tokens whose top-k set differs (TopK SAEs)
    rows_support_changed: float  # share of rows whose active latent set differs
    rel_s: float = 0.0  # max |Δs̃| / max |s̃| of the reference: scale-free, so dtype noise reads as such
    rel_pre: float = 0.0  # max |Δ| / max |value| of the pre-activations

    def line(self) -> str:
        topk = (
            ""
            if self.tokens_topk_changed is None
            else f", top-k set changed on {self.tokens_topk_changed:.2%} of tokens"
        )
        return (
            f"max |Δs̃| {self.max_abs_s:.2e} (relative {self.rel_s:.1e}); pre-activations max |Δ| "
            f"{self.max_abs_pre:.2e} (relative {self.rel_pre:.1e}){topk}, "
            f"active latent set changed in {self.rows_support_changed:.1%} of rows"
        )


@torch.inference_mode()
def compare(
    s_a: np.ndarray,
    s_b: np.ndarray,
    hidden_a: Sequence[torch.Tensor],
    hidden_b: Sequence[torch.Tensor],
    sae: Any,
    k: int | None,
    chunk: int = 1024,
) -> Agreement:
    """Two reads of the same rows: dense s̃ (rows, d_sae) each, and per row the hidden states of the tokens
    that count (same tokens, same order); `sae` computes both sides' pre-activations in float32."""
    if s_a.shape != s_b.shape or len(hidden_a) != len(hidden_b):
        raise ValueError("the two reads cover different rows")
    max_pre, scale_pre, changed, total = 0.0, 0.0, 0, 0
    for a, b in zip(hidden_a, hidden_b, strict=True):
        for start in range(0, a.shape[0], chunk):
            pa = pre_activations(sae, a[start : start + chunk])
            pb = pre_activations(sae, b[start : start + chunk])
            if not pa.numel():
                continue
            max_pre = max(max_pre, float((pa - pb).abs().max()))
            scale_pre = max(scale_pre, float(pb.abs().max()))
            if k is not None:
                ta = pa.topk(k, dim=-1).indices.sort(dim=-1).values
                tb = pb.topk(k, dim=-1).indices.sort(dim=-1).values
                changed += int((ta != tb).any(dim=-1).sum())
                total += pa.shape[0]
    support = ((s_a != 0) != (s_b != 0)).any(axis=1)
    max_s = float(np.abs(s_a - s_b).max(initial=0.0))
    scale_s = float(np.abs(s_b).max(initial=0.0))
    return Agreement(
        max_abs_s=max_s,
        max_abs_pre=max_pre,
        tokens_topk_changed=None if k is None else changed / max(total, 1),
        rows_support_changed=float(support.mean()) if len(support) else 0.0,
        rel_s=max_s / scale_s if scale_s else 0.0,
        rel_pre=max_pre / scale_pre if scale_pre else 0.0,
    )
