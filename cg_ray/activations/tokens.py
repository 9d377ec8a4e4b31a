"""Which tokens count, and how rows are packed into padded batches under a token budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

import torch

from cg_ray.activations.config import ReaderConfig
from cg_ray.activations.saes.base import SaeInfo

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

T = TypeVar("T")


@dataclass(frozen=True)
class TokenPolicy:
    """Resolved once per run and written to the manifest."""

    prepend_bos: bool
    exclude_bos: bool
    sink_positions: int
    exclude_special_tokens: bool
    bos_id: int | None
    pad_id: int
    special_ids: tuple[int, ...]

    def describe(self) -> dict[str, object]:
        """The policy as the manifest records it (the fields above)."""
        return asdict(self)


def resolve_policy(config: ReaderConfig, sae: SaeInfo, tokenizer: PreTrainedTokenizerBase) -> TokenPolicy:
    def auto(value: T | Literal["auto"], from_sae: T | None, fallback: T) -> T:
        if value != "auto":
            return value
        return fallback if from_sae is None else from_sae

    bos_id = tokenizer.bos_token_id
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    prepend = bool(auto(config.prepend_bos, sae.prepend_bos, False)) and bos_id is not None
    return TokenPolicy(
        prepend_bos=prepend,
        exclude_bos=config.exclude_bos,
        sink_positions=int(auto(config.sink_positions, sae.sink_positions, 0)),
        exclude_special_tokens=bool(auto(config.exclude_special_tokens, sae.exclude_special_tokens, False)),
        bos_id=bos_id,
        pad_id=int(pad_id),
        special_ids=tuple(sorted(set(tokenizer.all_special_ids))),
    )


def tokenize(
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    policy: TokenPolicy,
    max_tokens: int,
    *,
    add_special_tokens: bool,
) -> tuple[list[list[int]], int]:
    """Token ids per text (BOS first when the policy asks), truncated to max_tokens; and how many were cut."""
    encoded = tokenizer(list(texts), add_special_tokens=add_special_tokens)["input_ids"]
    out: list[list[int]] = []
    truncated = 0
    for ids in encoded:
        ids = list(ids)
        if policy.prepend_bos and (not ids or ids[0] != policy.bos_id):
            ids.insert(0, policy.bos_id)
        if len(ids) > max_tokens:
            ids = ids[:max_tokens]
            truncated += 1
        out.append(ids)
    return out, truncated


def tokenize_from(
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    starts: Sequence[int],
    policy: TokenPolicy,
    max_tokens: int,
    *,
    add_special_tokens: bool,
    span_tokens: int | None = None,
) -> tuple[list[list[int]], list[int], int]:
    """Token ids per text and the index of the first token that counts: text[:start] (the context, with
    the tokenizer's specials as `tokenize`) and text[start:] (without specials; at most `span_tokens`
    tokens) are tokenized separately and joined, so no token straddles the boundary."""
    if len(starts) != len(texts):
        raise ValueError(f"{len(starts)} start offsets for {len(texts)} texts")
    heads, _ = tokenize(
        tokenizer,
        [t[:s] for t, s in zip(texts, starts, strict=True)],
        policy,
        max_tokens,
        add_special_tokens=add_special_tokens,
    )
    tails = tokenizer([t[s:] for t, s in zip(texts, starts, strict=True)], add_special_tokens=False)["input_ids"]
    out: list[list[int]] = []
    firsts: list[int] = []
    truncated = 0
    for head, tail in zip(heads, tails, strict=True):
        tail = list(tail)
        if span_tokens is not None and len(tail) > span_tokens:
            tail = tail[:span_tokens]
            truncated += 1
        ids = head + tail
        if len(ids) > max_tokens:
            ids = ids[:max_tokens]
            truncated += 1
        out.append(ids)
        firsts.append(len(head))
    return out, firsts, truncated


def plan_batches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Row indices grouped into batches, longest first, each with (rows × longest) ≤ budget
    (a single row longer than the budget gets a batch of its own)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else lengths[i]
        if current and (len(current) + 1) * longest > token_budget:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def pad(
    seqs: Sequence[Sequence[int]], pad_id: int, side: Literal["left", "right"], multiple: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded ids and attention mask; `multiple` rounds the width up (fewer shapes for a compiled model)."""
    width = -(-max(len(s) for s in seqs) // multiple) * multiple
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        if not s:
            continue
        cols = slice(width - len(s), width) if side == "left" else slice(0, len(s))
        ids[r, cols] = torch.as_tensor(s, dtype=torch.long)
        mask[r, cols] = 1
    return ids, mask


def counted_mask(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    policy: TokenPolicy,
    count_from: torch.Tensor | None = None,
) -> torch.Tensor:
    """True where a token counts towards s and |x|: real (not padding), past the sink positions,
    not the leading BOS, not a special token (each as the policy says), and — when `count_from` gives
    each row's first counted position — not before it (the context of a response)."""
    real = attention_mask.bool()
    position = attention_mask.long().cumsum(-1) - 1  # position within the row, padding-independent
    first = None if count_from is None else count_from.to(position.device).unsqueeze(1)
    return real & counted_tokens(input_ids, position, policy, first)


def counted_tokens(
    input_ids: torch.Tensor, position: torch.Tensor, policy: TokenPolicy, first: torch.Tensor | None = None
) -> torch.Tensor:
    """The policy's test on tokens given their position within their row (any shape; `first`, the row's
    first counted position, broadcast against them). Shared by the padded and the packed paths."""
    keep = position >= policy.sink_positions
    if first is not None:
        keep &= position >= first
    if policy.exclude_bos and policy.bos_id is not None:
        keep &= ~((position == 0) & (input_ids == policy.bos_id))
    if policy.exclude_special_tokens and policy.special_ids:
        special = torch.as_tensor(policy.special_ids, device=input_ids.device)
        keep &= ~torch.isin(input_ids, special)
    return keep
