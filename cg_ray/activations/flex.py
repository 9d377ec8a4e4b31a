"""Packed attention through FlexAttention: one call per layer over the whole packed sequence.

The per-row SDPA loop (`varlen.packed_attention`'s "sdpa" kernel) launches one small kernel per row and
layer; on an H100 that loop ran 1.75× slower than padded batches (docs/reader.md, issue #33). Here the
row layout becomes a document mask: token q attends key k iff both are in the same group (a row, or a
shared prefix with the rows continuing it), k is in the group's prefix or in q's own segment, and k is
not after q in the row (positions restart per group). Gemma-2's sliding window is a bound on the same
positions in the mask, its logit soft-capping a `score_mod`; GQA is FlexAttention's `enable_gqa`.

The layout's `BlockMask` is built once per packed batch (per window size) and reused by every layer. On
CUDA the fused kernel comes from `torch.compile(flex_attention)`; elsewhere the unfused reference runs
(exact, slow: it is what the CPU tests check against the padded path).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

    from cg_ray.activations.varlen import Block

# Packed lengths are rounded up to this (FlexAttention's block size): fewer distinct shapes for the
# compiled kernel; the extra key/query slots belong to no group, so nothing attends to them.
ALIGN = 128


@dataclass
class FlexLayout:
    """Per packed token: its group, its segment (a prefix or one row's own tokens), whether it is a
    prefix token, and its position in the row; and the block masks made from them, per window."""

    length: int  # real packed tokens
    group: torch.Tensor
    segment: torch.Tensor
    prefix: torch.Tensor
    position: torch.Tensor
    masks: dict[int | None, BlockMask] = field(default_factory=dict)

    @classmethod
    def of(cls, blocks: Sequence[Block], device: torch.device | str) -> FlexLayout:
        length = max((b.start + b.length for b in blocks), default=0)
        size = -(-max(length, 1) // ALIGN) * ALIGN
        group = torch.full((size,), -1, dtype=torch.long)
        segment = torch.full((size,), -1, dtype=torch.long)
        prefix = torch.zeros(size, dtype=torch.bool)
        position = torch.zeros(size, dtype=torch.long)
        for i, b in enumerate(blocks):
            span = slice(b.start, b.start + b.length)
            # a plain causal block opens its group (a prefix, or a row alone); a suffix joins its prefix's
            group[span] = b.prefix_start if b.prefix_len else b.start
            segment[span] = i
            prefix[span] = b.prefix_len == 0
            position[span] = torch.arange(b.prefix_len, b.prefix_len + b.length)
        dev = torch.device(device)
        return cls(length, group.to(dev), segment.to(dev), prefix.to(dev), position.to(dev))

    @property
    def size(self) -> int:
        return int(self.group.shape[0])

    def mask_mod(self, window: int | None) -> Callable[..., torch.Tensor]:
        group, segment, prefix, position = self.group, self.segment, self.prefix, self.position

        def keep(b: Any, h: Any, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            same = (group[q] == group[k]) & (group[k] >= 0)
            visible = same & (prefix[k] | (segment[q] == segment[k])) & (position[k] <= position[q])
            if window is not None:
                visible = visible & (position[q] - position[k] < window)
            return visible

        return keep

    def block_mask(self, window: int | None) -> BlockMask:
        """Built on first use in a batch, then shared by every layer with this window."""
        if window not in self.masks:
            from torch.nn.attention.flex_attention import create_block_mask

            self.masks[window] = create_block_mask(
                self.mask_mod(window), None, None, self.size, self.size, device=self.group.device
            )
        return self.masks[window]


_SOFTCAP_MODS: dict[float, Callable[..., torch.Tensor]] = {}


def softcap_mod(cap: float) -> Callable[..., torch.Tensor]:
    """Gemma-2's attention logit soft-capping, one function object per cap (a compiled kernel is reused)."""
    if cap not in _SOFTCAP_MODS:

        def mod(score: torch.Tensor, b: Any, h: Any, q: Any, k: Any) -> torch.Tensor:
            return cap * torch.tanh(score / cap)

        _SOFTCAP_MODS[cap] = mod
    return _SOFTCAP_MODS[cap]


_COMPILED: list[Callable[..., Any]] = []


def _kernel(device: torch.device) -> Callable[..., Any]:
    from torch.nn.attention.flex_attention import flex_attention

    if device.type != "cuda":
        return flex_attention
    if not _COMPILED:  # compiled once per process; dynamic: one kernel for every packed length
        _COMPILED.append(torch.compile(flex_attention, dynamic=True))
    return _COMPILED[0]


def flex_packed_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    layout: FlexLayout,
    scaling: float | None,
    window: int | None,
    softcap: float | None,
) -> torch.Tensor:
    """query (1, heads, T, d), key/value (1, kv heads, T, d) → (1, T, heads, d)."""
    n = query.shape[2]
    if n != layout.length:
        raise ValueError(f"the packed layout has {layout.length} tokens, the attention got {n}")
    pad = layout.size - n
    if pad:
        query, key, value = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (query, key, value))
    with warnings.catch_warnings():  # eager off CUDA is deliberate (tests); the warning says to compile
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        out = _kernel(query.device)(
            query,
            key,
            value,
            score_mod=None if softcap is None else softcap_mod(float(softcap)),
            block_mask=layout.block_mask(window),
            scale=scaling,
            enable_gqa=query.shape[1] != key.shape[1],
        )
    result: torch.Tensor = out[:, :, :n].transpose(1, 2).contiguous()
    return result
