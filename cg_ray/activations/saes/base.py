"""The SAE Protocol the reader needs, and the metadata an SAE may carry about how it was trained."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: importing the SAE types must not load torch
    import torch


@dataclass(frozen=True)
class SaeInfo:
    """What the reader may infer from an SAE (None: unknown; the reader then uses its own settings)."""

    backend: str
    source: str
    architecture: str
    d_in: int
    d_sae: int
    hook_layer: int | None = None
    sink_positions: int | None = None  # sae-lens seqpos_slice start used in training
    exclude_special_tokens: bool | None = None
    prepend_bos: bool | None = None
    # sha256 (16 hex) of the weights file: an SAE retrained in place keeps its spec and path, and its
    # concept ids no longer correspond (`cg-ray diff` compares this). None where there is no local file.
    fingerprint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class SaeEncoder(Protocol):
    """Maps activations (n, d_in) to feature activations (n, d_sae) on the SAE's device and dtype."""

    @property
    def info(self) -> SaeInfo: ...

    def encode(self, x: torch.Tensor) -> torch.Tensor: ...

    @property
    def topk_k(self) -> int | None:
        """k for a TopK SAE, whose `encode_topk` pooling then uses (no dense (tokens, d_sae) matrix); else None."""
        ...

    def encode_topk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(values ≥ 0, feature indices), each (n, k); only called when `topk_k` is not None."""
        ...

    def to(self, device: torch.device | str, dtype: torch.dtype) -> SaeEncoder: ...


def file_fingerprint(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def hook_layer_from_name(hook_name: str | None) -> int | None:
    """Layer index from an HF module name (`model.layers.20`) or a TransformerLens one (`blocks.20.…`)."""
    if not hook_name:
        return None
    parts = hook_name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part in ("layers", "blocks", "h") and parts[i + 1].isdigit():
            return int(parts[i + 1])
    return None
