"""Our own SAE encoder for weights that come as plain tensors (npz, .pth, safetensors).

Semantics follow sae-lens' inference `encode` so results agree with it exactly:
  pre = (x − b_dec·apply_b_dec_to_input) @ W_enc + b_enc
  relu:     relu(pre)
  jumprelu: relu(pre) · [pre > threshold]
  topk:     top-k of pre (× ‖W_dec row‖ when rescale_by_decoder_norm), relu, others 0
"""

from __future__ import annotations

from typing import Literal

import torch

from cg_ray.activations.saes.base import SaeInfo
from cg_ray.errors import InputError

Architecture = Literal["relu", "jumprelu", "topk"]


class DenseSae:
    def __init__(
        self,
        *,
        W_enc: torch.Tensor,
        b_enc: torch.Tensor,
        b_dec: torch.Tensor | None,
        architecture: Architecture,
        info: SaeInfo,
        threshold: torch.Tensor | None = None,
        k: int | None = None,
        W_dec: torch.Tensor | None = None,
        apply_b_dec_to_input: bool = True,
        rescale_by_decoder_norm: bool = False,
    ) -> None:
        d_in, d_sae = W_enc.shape
        where = info.source
        if b_enc.shape != (d_sae,):
            raise InputError(f"b_enc has shape {tuple(b_enc.shape)}, expected ({d_sae},)", path=where)
        if b_dec is not None and b_dec.shape != (d_in,):
            raise InputError(f"b_dec has shape {tuple(b_dec.shape)}, expected ({d_in},)", path=where)
        if architecture == "jumprelu" and (threshold is None or threshold.shape != (d_sae,)):
            raise InputError(f"a JumpReLU SAE needs a threshold of shape ({d_sae},)", path=where)
        if architecture == "topk" and (k is None or not 0 < k <= d_sae):
            raise InputError(f"a TopK SAE needs 0 < k ≤ d_sae, got k={k}", path=where)
        if rescale_by_decoder_norm and (W_dec is None or W_dec.shape != (d_sae, d_in)):
            raise InputError("rescaling by decoder norm needs W_dec of shape (d_sae, d_in)", path=where)
        self._info = info
        self.architecture = architecture
        self.k = k
        self.W_enc = W_enc
        self.b_enc = b_enc
        # Folded once: the input offset, and the decoder-norm scale of TopK pre-activations.
        self.b_in = b_dec if (b_dec is not None and apply_b_dec_to_input) else None
        self.threshold = threshold
        self.pre_scale = W_dec.norm(dim=-1) if rescale_by_decoder_norm and W_dec is not None else None

    @property
    def info(self) -> SaeInfo:
        return self._info

    def to(self, device: torch.device | str, dtype: torch.dtype) -> DenseSae:
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device=device, dtype=dtype)

        self.W_enc = self.W_enc.to(device=device, dtype=dtype)
        self.b_enc = self.b_enc.to(device=device, dtype=dtype)
        self.b_in = move(self.b_in)
        self.threshold = move(self.threshold)
        self.pre_scale = move(self.pre_scale)
        return self

    @property
    def topk_k(self) -> int | None:
        """k for a TopK SAE (then `encode_topk` gives the k values and indices per token), else None."""
        return self.k if self.architecture == "topk" else None

    def _pre(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.W_enc.dtype)
        if self.b_in is not None:
            x = x - self.b_in
        return x @ self.W_enc + self.b_enc

    @torch.no_grad()
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        if self.architecture == "topk":
            values, indices = self.encode_topk(x)
            return torch.zeros((*x.shape[:-1], self.W_enc.shape[1]), dtype=values.dtype, device=values.device).scatter_(
                -1, indices, values
            )
        pre = self._pre(x)
        if self.architecture == "relu":
            return pre.relu()
        assert self.threshold is not None
        return pre.relu() * (pre > self.threshold).to(pre.dtype)

    @torch.no_grad()
    def encode_topk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The k non-zero candidates per token: (values ≥ 0, feature indices), each (n, k)."""
        assert self.k is not None, "encode_topk needs a TopK SAE"
        pre = self._pre(x)
        if self.pre_scale is not None:
            pre = pre * self.pre_scale
        values, indices = pre.topk(self.k, dim=-1, sorted=False)
        return values.relu(), indices
