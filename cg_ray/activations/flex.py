"""Packed attention through FlexAttention: one call per layer over the whole packed sequence.

The per-row SDPA loop (`varlen.packed_attention`'s "sdpa" kernel) launches one small kernel per row and
layer; on an H100 that loop ran 1.75× slower than padded batches (docs/reader.md, issue #33). Here the
row layout becomes a document mask: token q attends key k iff both are in the same group (a row, or a
shared prefix with the rows continuing it), k is in the group's prefix or in q's own segment, and k is
not after q in the row (positions restart per group). Gemma-2's sliding window is a bound on the same
positions in the mask, its logit soft-capping a `score_mod` (the cap a constant of the model); GQA is
FlexAttention's `enable_gqa`.

Built for torch.compile on CUDA (issue #41):
- the `BlockMask`s are built per packed batch **before** the forward, outside the model and every custom
  op, from tensors only (group / segment / prefix / position, and the window as a per-model constant),
  one per window kind, and handed to the model as its `attention_mask` (transformers passes a 4-D
  `BlockMask` through untouched; Gemma-2 takes a dict per layer type);
- every packed batch has one static length: the token budget rounded up to the block size (a group longer
  than the budget gets its own multiple), so the mask builder, the FlexAttention kernel and a compiled
  model each meet one shape (two at most) and are compiled with `dynamic=False`;
- the attention function (`varlen.varlen_attention`) dispatches on `isinstance(attention_mask, BlockMask)`:
  inside a compiled model FlexAttention is traced inline, in an eager model on CUDA it is the compiled
  kernel; off CUDA the unfused reference runs (exact, slow: what the CPU tests check);
- a recompile is an error (`guarded()`), never dynamo's silent eager fallback, which would materialise the
  whole score matrix; the reader then falls back to padded batches and says why in the manifest.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

    from cg_ray.activations.packed import Block

# FlexAttention's block size: packed lengths are multiples of it; the slots past the real tokens belong to
# no group, so nothing attends to them and they attend to nothing.
ALIGN = 128


@dataclass
class CompileSettings:
    """How the flex path compiles. `backend`: torch.compile's backend for the model, the mask builder and
    the kernel (tests use "eager" / "aot_eager" to count graphs without inductor); `masks` / `kernel`:
    compile `create_block_mask` and `flex_attention` (None: on CUDA only); `recompile_limit`: dynamo's
    limit while a packed forward runs (past it: an error, not an eager fallback)."""

    backend: Any = "inductor"
    masks: bool | None = None
    kernel: bool | None = None
    recompile_limit: int = 8


SETTINGS = CompileSettings()


def static_length(tokens: int, budget: int) -> int:
    """The packed length of a batch holding `tokens` real tokens: the budget rounded up to ALIGN, or the
    batch's own multiple of ALIGN when it is longer (a group larger than the budget)."""
    top = -(-max(budget, 1) // ALIGN) * ALIGN
    return top if tokens <= top else -(-tokens // ALIGN) * ALIGN


@dataclass
class FlexLayout:
    """Per packed slot: its group, its segment (a prefix or one row's own tokens), whether it is a prefix
    token, and its position in the row (-1 for the padding slots past `length`)."""

    length: int  # real packed tokens
    group: torch.Tensor
    segment: torch.Tensor
    prefix: torch.Tensor
    position: torch.Tensor

    @classmethod
    def of(cls, blocks: Sequence[Block], device: torch.device | str, size: int | None = None) -> FlexLayout:
        length = max((b.start + b.length for b in blocks), default=0)
        size = size if size is not None else -(-max(length, 1) // ALIGN) * ALIGN
        if size < length or size % ALIGN:
            raise ValueError(f"a packed length of {size} cannot hold {length} tokens in blocks of {ALIGN}")
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
        return document_mask(self.group, self.segment, self.prefix, self.position, window)

    def block_masks(self, windows: Sequence[int | None]) -> dict[int | None, BlockMask]:
        """One BlockMask per window kind, built now (before the forward), with the (compiled on CUDA)
        builder at this layout's static size."""
        build = _mask_builder(self.group.device)
        return {w: build(self.group, self.segment, self.prefix, self.position, w) for w in dict.fromkeys(windows)}


def document_mask(
    group: torch.Tensor, segment: torch.Tensor, prefix: torch.Tensor, position: torch.Tensor, window: int | None
) -> Callable[..., torch.Tensor]:
    """The mask_mod: reads only the layout's tensors and the window (a per-model constant)."""

    def keep(b: Any, h: Any, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        same = (group[q] == group[k]) & (group[k] >= 0)
        visible = same & (prefix[k] | (segment[q] == segment[k])) & (position[k] <= position[q])
        if window is not None:
            visible = visible & (position[q] - position[k] < window)
        return visible

    return keep


def _build_block_mask(
    group: torch.Tensor, segment: torch.Tensor, prefix: torch.Tensor, position: torch.Tensor, window: int | None
) -> BlockMask:
    from torch.nn.attention.flex_attention import create_block_mask

    n = group.shape[0]
    keep = document_mask(group, segment, prefix, position, window)
    return create_block_mask(keep, None, None, n, n, device=group.device)


def _broadcast_block_mask(
    group: torch.Tensor, segment: torch.Tensor, prefix: torch.Tensor, position: torch.Tensor, window: int | None
) -> BlockMask:
    """The same BlockMask, eagerly: the dense (T × T) mask by broadcasting the mask_mod, then its blocks.
    For small layouts off CUDA (the tests, a CPU), where create_block_mask's vmap costs ~0.6 s a mask."""
    try:
        from torch.nn.attention.flex_attention import (
            _convert_mask_to_block_mask,
            _create_sparse_block_from_block_mask,
        )
    except ImportError:  # pragma: no cover - private helpers moved: the public way
        return _build_block_mask(group, segment, prefix, position, window)
    n = group.shape[0]
    keep = document_mask(group, segment, prefix, position, window)
    idx = torch.arange(n, device=group.device)
    dense = keep(None, None, idx.view(-1, 1), idx.view(1, -1))[None, None]
    blocks = _convert_mask_to_block_mask(dense, ALIGN, ALIGN, separate_full_blocks=True)
    return _create_sparse_block_from_block_mask(blocks, keep, (n, n), ALIGN, ALIGN)


_COMPILED: dict[str, Callable[..., Any]] = {}


def _on(flag: bool | None, device: torch.device) -> bool:
    return device.type == "cuda" if flag is None else flag


def _compiled(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` compiled once per process and backend, with static shapes (dynamic=False: a closure float such
    as the soft-cap stays a constant; dynamic=True made it an unbacked symbol inductor could not lower)."""
    key = f"{name}|{SETTINGS.backend!r}"
    if key not in _COMPILED:
        _COMPILED[key] = torch.compile(fn, backend=SETTINGS.backend, dynamic=False)
    return _COMPILED[key]


def _mask_builder(device: torch.device) -> Callable[..., BlockMask]:
    if _on(SETTINGS.masks, device):  # CUDA: compiled, never a (T × T) tensor
        return _compiled("create_block_mask", _build_block_mask)
    return _broadcast_block_mask


_SOFTCAP_MODS: dict[float, Callable[..., torch.Tensor]] = {}


def softcap_mod(cap: float) -> Callable[..., torch.Tensor]:
    """Gemma-2's attention logit soft-capping, one function object per cap (a compiled kernel is reused).
    Call it once before a compiled forward traces it: dynamo guards on this dict's contents."""
    if cap not in _SOFTCAP_MODS:

        def mod(score: torch.Tensor, b: Any, h: Any, q: Any, k: Any) -> torch.Tensor:
            return cap * torch.tanh(score / cap)

        _SOFTCAP_MODS[cap] = mod
    return _SOFTCAP_MODS[cap]


def flex_attention_call(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    block_mask: BlockMask,
    scaling: float | None,
    softcap: float | None,
) -> torch.Tensor:
    """query (B, heads, T, d), key/value (B, kv heads, T, d) with T the mask's static length →
    (B, T, heads, d), as transformers' attention functions return."""
    from torch.nn.attention.flex_attention import flex_attention

    kwargs: dict[str, Any] = {
        "score_mod": None if softcap is None else softcap_mod(float(softcap)),
        "block_mask": block_mask,
        "scale": scaling,
        "enable_gqa": query.shape[1] != key.shape[1],
    }
    if torch.compiler.is_compiling():  # a compiled model: traced inline, one graph with the layers
        out = flex_attention(query, key, value, **kwargs)
    elif _on(SETTINGS.kernel, query.device):
        out = _compiled("flex_attention", flex_attention)(query, key, value, **kwargs)
    elif query.device.type == "cuda":  # the unfused reference on CUDA: slow, so let torch's warning show
        out = flex_attention(query, key, value, **kwargs)
    else:
        with warnings.catch_warnings():  # eager off CUDA is deliberate (the CPU tests); the warning says compile
            warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
            out = flex_attention(query, key, value, **kwargs)
    result: torch.Tensor = out.transpose(1, 2).contiguous()
    return result


class Recompiled(RuntimeError):
    """A packed batch of a length already met compiled a new graph: something guards on per-batch data."""


def graphs_compiled() -> int:
    """Graphs dynamo has compiled in this process so far (every backend)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """While a packed flex forward runs: dynamo's recompile limit raises instead of running eagerly."""
    import torch._dynamo.config as config

    names: dict[str, Any] = {"fail_on_recompile_limit_hit": True, "recompile_limit": SETTINGS.recompile_limit}
    if not hasattr(config, "recompile_limit"):  # torch < 2.6 spelled it so
        names = {"fail_on_cache_limit_hit": True, "cache_size_limit": SETTINGS.recompile_limit}
    with config.patch({k: v for k, v in names.items() if hasattr(config, k)}):
        yield


def failures() -> tuple[type[BaseException], ...]:
    """What makes the reader leave the flex path for padded batches: a recompile, a compile that failed."""
    import torch._dynamo.exc as exc

    found: list[type[BaseException]] = [Recompiled]
    for name in ("FailOnRecompileLimitHit", "FailOnCacheLimitHit", "RecompileError", "BackendCompilerFailed"):
        if isinstance(getattr(exc, name, None), type):
            found.append(getattr(exc, name))
    try:
        from torch._inductor.exc import InductorError

        found.append(InductorError)
    except ImportError:  # pragma: no cover - older torch
        pass
    return tuple(found)


LAYER_KINDS = {"full_attention", "sliding_attention"}


def layer_windows(config: Any) -> dict[str, int | None] | None:
    """The window of each attention layer kind of a (text) config, by transformers' layer type ("" when
    the model has one kind); None when a layer kind is one this mask does not know (chunked attention)."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if types:
        if not set(types) <= LAYER_KINDS:
            return None
        kinds = {t: (window if t == "sliding_attention" else None) for t in dict.fromkeys(types)}
        return kinds if len(kinds) > 1 else {"": next(iter(kinds.values()))}
    use = getattr(config, "use_sliding_window", True)
    return {"": window if window and use else None}


def mask_argument(masks: dict[int | None, BlockMask], windows: dict[str, int | None]) -> Any:
    """What the model takes as `attention_mask`: the BlockMask, or (several layer kinds: Gemma-2) a dict
    of them by layer type, which transformers' models with mixed layers take as it is."""
    if "" in windows:
        return masks[windows[""]]
    return {kind: masks[w] for kind, w in windows.items()}
