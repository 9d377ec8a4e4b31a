"""Packed forward passes: rows concatenated into one sequence, no padding, each row attending only to itself.

Rows that start with the same tokens (the same question answered by several models, a shared few-shot or
system prompt) are grouped: the shared prefix is computed once and each row's remaining tokens (its
suffix) attend to that prefix and then causally to themselves — exactly what each row sees alone, as the
prefix of a causal model does not depend on what follows it.

The linear layers then see only real tokens; attention goes through a transformers attention function
registered under ATTENTION_NAME, with one of two kernels: "sdpa" runs SDPA per block (a causal block for a
prefix or unshared row; for a suffix, keys = prefix ++ suffix with a causal mask on the suffix part), the
layout read from a context variable inside a custom op (so a compiled forward stays one graph); "flex" runs
one FlexAttention call per layer over the whole sequence, its document masks built before the forward and
passed as the model's `attention_mask` (flex.py; the only kernel with Gemma-2's logit soft-capping). The
attention function tells them apart by the mask it gets: a `BlockMask` (flex), the NO_MASK placeholder
(the SDPA loop), anything else (a padded forward: transformers' SDPA). Positions restart at 0 for every
group, so rotary / learned positions are those of the row alone.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.attention.flex_attention import BlockMask

from cg_ray.activations.flex import flex_attention_call
from cg_ray.activations.model import text_config
from cg_ray.activations.packed import Block, is_no_mask

if TYPE_CHECKING:
    from transformers import PreTrainedModel

ATTENTION_NAME = "cg_ray_varlen"
KERNELS = ("sdpa", "flex")


@dataclass(frozen=True)
class Group:
    """Rows (indices into the call's rows) whose first `prefix` tokens are identical. A group of one row
    has prefix = the whole row."""

    rows: tuple[int, ...]
    prefix: int
    size: int  # packed tokens: prefix + the rows' suffixes


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan_groups(seqs: Sequence[Sequence[int]], min_shared: int | None, max_size: int) -> list[Group]:
    """Rows sorted by their tokens so that rows sharing a prefix are neighbours, then grouped greedily
    while the tokens saved ((rows − 1) × shared prefix) grow and the group stays ≤ max_size packed tokens.
    `min_shared=None`: no sharing, every row its own group."""
    n = len(seqs)
    if min_shared is None:
        return [Group((i,), len(seqs[i]), len(seqs[i])) for i in range(n)]
    order = sorted(range(n), key=lambda i: list(seqs[i]))
    groups: list[Group] = []
    rows: list[int] = []
    shared = 0
    total = 0  # sum of the group's row lengths

    def close() -> None:
        if len(rows) == 1:
            groups.append(Group((rows[0],), len(seqs[rows[0]]), len(seqs[rows[0]])))
        elif rows:
            groups.append(Group(tuple(rows), shared, total - (len(rows) - 1) * shared))

    for i in order:
        if rows:
            common = min(shared, _lcp(seqs[rows[-1]], seqs[i])) if len(rows) > 1 else _lcp(seqs[rows[0]], seqs[i])
            size = total + len(seqs[i]) - len(rows) * common
            saves_more = len(rows) * common > (len(rows) - 1) * shared if len(rows) > 1 else True
            if common >= max(min_shared, 1) and saves_more and size <= max_size:
                rows.append(i)
                shared, total = common, total + len(seqs[i])
                continue
            close()
        rows, shared, total = [i], len(seqs[i]), len(seqs[i])
    close()
    return groups


def plan_packed_batches(groups: Sequence[Group], token_budget: int) -> list[list[Group]]:
    """First-fit decreasing: groups into batches of ≤ token_budget packed tokens (a larger group alone)."""
    batches: list[list[Group]] = []
    room: list[int] = []
    for g in sorted(groups, key=lambda g: (-g.size, g.rows[0])):
        for b, left in enumerate(room):
            if g.size <= left:
                batches[b].append(g)
                room[b] -= g.size
                break
        else:
            batches.append([g])
            room.append(token_budget - g.size)
    return batches


@dataclass
class PackedBatch:
    input_ids: torch.Tensor  # (1, T)
    position_ids: torch.Tensor  # (1, T)
    blocks: list[Block]
    rows: list[int]  # the call's row index of each row in this batch
    row_tokens: list[torch.Tensor]  # per row: the packed index of each of its tokens, in order


def pack(seqs: Sequence[Sequence[int]], batch: Sequence[Group]) -> PackedBatch:
    ids: list[int] = []
    pos: list[int] = []
    blocks: list[Block] = []
    rows: list[int] = []
    row_tokens: list[torch.Tensor] = []
    for g in batch:
        start = len(ids)
        first = seqs[g.rows[0]]
        ids.extend(first[: g.prefix])
        pos.extend(range(g.prefix))
        if g.prefix:
            blocks.append(Block(start, g.prefix))
        head = torch.arange(start, start + g.prefix)
        for r in g.rows:
            tail = seqs[r][g.prefix :]
            at = len(ids)
            ids.extend(tail)
            pos.extend(range(g.prefix, g.prefix + len(tail)))
            if tail:
                blocks.append(Block(at, len(tail), start, g.prefix))
            rows.append(r)
            row_tokens.append(torch.cat([head, torch.arange(at, at + len(tail))]))
    return PackedBatch(
        input_ids=torch.as_tensor([ids], dtype=torch.long),
        position_ids=torch.as_tensor([pos], dtype=torch.long),
        blocks=blocks,
        rows=rows,
        row_tokens=row_tokens,
    )


@dataclass
class Layout:
    """What the SDPA loop reads while one packed forward runs: the blocks."""

    blocks: list[Block]


_LAYOUT: contextvars.ContextVar[Layout | None] = contextvars.ContextVar("cg_ray_varlen_layout", default=None)


@contextlib.contextmanager
def packed_blocks(blocks: list[Block]) -> Iterator[None]:
    """The block layout the SDPA loop reads while one packed forward runs (the flex kernel needs none: its
    masks are the forward's `attention_mask`)."""
    token = _LAYOUT.set(Layout(blocks))
    try:
        yield
    finally:
        _LAYOUT.reset(token)


def _mask(q_len: int, prefix_len: int, window: int | None, device: torch.device) -> torch.Tensor:
    """(q_len, prefix_len + q_len) boolean: the whole prefix, then causal; a sliding window if any."""
    q = torch.arange(q_len, device=device).unsqueeze(1) + prefix_len  # query positions in the row
    k = torch.arange(prefix_len + q_len, device=device).unsqueeze(0)
    keep = k <= q
    if window is not None:
        keep &= q - k < window
    return keep


def _blocks_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    blocks: list[Block],
    scaling: float | None,
    window: int | None,
) -> Iterator[tuple[Block, torch.Tensor]]:
    n_rep = query.shape[1] // key.shape[1]
    for b in blocks:
        q = query[:, :, b.start : b.start + b.length]
        k = key[:, :, b.start : b.start + b.length]
        v = value[:, :, b.start : b.start + b.length]
        if b.prefix_len:
            end = b.prefix_start + b.prefix_len
            k = torch.cat([key[:, :, b.prefix_start : end], k], dim=2)
            v = torch.cat([value[:, :, b.prefix_start : end], v], dim=2)
        if n_rep > 1:  # GQA: share each key/value head across its query heads (a view until SDPA)
            k = k.repeat_interleave(n_rep, dim=1)
            v = v.repeat_interleave(n_rep, dim=1)
        needs_mask = b.prefix_len > 0 or (window is not None and b.length > window)
        mask = _mask(b.length, b.prefix_len, window, query.device) if needs_mask else None
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, scale=scaling
        )
        yield b, out


@torch.library.custom_op("cg_ray::packed_attention", mutates_args=())
def packed_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    scaling: float | None,
    window: int | None,
    softcap: float | None = None,
) -> torch.Tensor:
    """The SDPA loop over the current `packed_blocks` layout, (1, T, heads, d). A custom op: torch.compile
    keeps it in the graph as one opaque call (no graph break per layer)."""
    layout = _LAYOUT.get()
    if layout is None:
        raise RuntimeError("packed_attention outside packed_blocks(...)")
    if softcap is not None:
        raise RuntimeError("the SDPA packed kernel has no logit soft-capping: use the flex kernel")
    out = query.new_empty(query.shape)
    for b, res in _blocks_attention(query, key, value, layout.blocks, scaling, window):
        out[:, :, b.start : b.start + b.length] = res
    return out.transpose(1, 2).contiguous()


@packed_attention.register_fake
def _packed_attention_shape(query: torch.Tensor, *_: Any, **__: Any) -> torch.Tensor:
    """The op's output for tracing: only its shape, (1, T, heads, d), read from the query's; torch calls
    this with the op's arguments (the schema comes from `packed_attention`, not from this signature)."""
    return query.new_empty(query.shape[0], query.shape[2], query.shape[1], query.shape[3])


def varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    sliding_window: int | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """A transformers attention function: query (1, heads, T, d), key/value (1, kv heads, T, d);
    returns (1, T, heads, d) like transformers' SDPA integration. Dispatches on the mask: a BlockMask is a
    packed flex forward (the mask already holds the row layout and the window), the NO_MASK placeholder a
    packed forward through the SDPA loop, anything else a padded forward (transformers' SDPA)."""
    if isinstance(attention_mask, BlockMask):
        return flex_attention_call(query, key, value, attention_mask, scaling, kwargs.get("softcap")), None
    # torch.compile cannot read the context variable; a compiled packed forward is told by its placeholder mask
    packed = is_no_mask(attention_mask) if torch.compiler.is_compiling() else _LAYOUT.get() is not None
    if not packed:  # an ordinary (padded) forward of the same model: transformers' own SDPA path
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            sliding_window=sliding_window,
            **kwargs,
        )
    if query.shape[0] != 1:
        raise ValueError(f"a packed batch is one sequence, got a batch of {query.shape[0]}")
    softcap = kwargs.get("softcap")  # Gemma-2's attention logit soft-capping
    return packed_attention(query, key, value, scaling, sliding_window, softcap), None


def packed_kernels(base: PreTrainedModel) -> dict[str, str | None]:
    """Per packed attention kernel: None when the model can run packed with it, else why not."""
    config = text_config(base)
    if getattr(base, "_supports_attention_backend", False) is not True:
        why = f"{type(base).__name__} does not take a custom attention function"
        return dict.fromkeys(KERNELS, why)
    sdpa = "attention logit soft-capping (SDPA has none)" if getattr(config, "attn_logit_softcapping", None) else None
    return {"sdpa": sdpa, "flex": None}


def packing_supported(base: PreTrainedModel) -> str | None:
    """None when the model can run packed with the SDPA kernel, else why not."""
    return packed_kernels(base)["sdpa"]


def use_varlen_attention(base: PreTrainedModel) -> None:
    """Register the attention function (once) and switch the model to it; padded forwards of the same model
    (outside `packed_blocks`) get SDPA's usual masks and kernel."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION_NAME, varlen_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
    base.set_attn_implementation(ATTENTION_NAME)
