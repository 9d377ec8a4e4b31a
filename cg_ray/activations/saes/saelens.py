"""sae-lens SAEs: pretrained releases (hub) and on-disk directories; encoding is sae-lens' own `encode`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from cg_ray.activations.saes.base import SaeInfo, file_fingerprint, hook_layer_from_name
from cg_ray.errors import InputError


class SaeLensSae:
    def __init__(self, sae: Any, *, backend: str, source: str, fingerprint: str | None = None) -> None:
        self.sae = sae.eval()
        self._dec_norm: torch.Tensor | None = None  # cached ‖W_dec row‖ (TopK pre-activation scale)
        meta = getattr(sae.cfg, "metadata", None)
        seqpos = getattr(meta, "seqpos_slice", None)
        excl = getattr(meta, "exclude_special_tokens", None)
        hook_name = getattr(meta, "hook_name", None)
        self._info = SaeInfo(
            backend=backend,
            source=source,
            architecture=str(sae.cfg.architecture()),
            d_in=int(sae.cfg.d_in),
            d_sae=int(sae.cfg.d_sae),
            hook_layer=hook_layer_from_name(hook_name),
            sink_positions=int(seqpos[0]) if seqpos and seqpos[0] is not None else None,
            exclude_special_tokens=None if excl is None else bool(excl),
            prepend_bos=getattr(meta, "prepend_bos", None),
            fingerprint=fingerprint,
            extra={"hook_name": hook_name},
        )

    @property
    def info(self) -> SaeInfo:
        return self._info

    def to(self, device: torch.device | str, dtype: torch.dtype) -> SaeLensSae:
        self.sae.to(device=device, dtype=dtype)
        self._dec_norm = None
        return self

    @property
    def topk_k(self) -> int | None:
        """k when this is sae-lens' inference TopK SAE (its `encode` is the one `encode_topk` mirrors)."""
        from sae_lens import TopKSAE
        from sae_lens.saes.topk_sae import TopK

        fn = getattr(self.sae, "activation_fn", None)
        if type(self.sae) is TopKSAE and isinstance(fn, TopK) and not fn.use_sparse_activations:
            return int(fn.k)
        return None

    @torch.no_grad()
    def encode_topk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """sae-lens' TopK encode without the dense scatter: (values ≥ 0, feature indices), each (n, k)."""
        k = self.topk_k
        assert k is not None, "encode_topk needs sae-lens' TopK SAE"
        sae = self.sae
        pre = sae.hook_sae_acts_pre(sae.process_sae_in(x) @ sae.W_enc + sae.b_enc)
        if sae.cfg.rescale_acts_by_decoder_norm:
            if self._dec_norm is None:  # sae-lens recomputes it on every call
                self._dec_norm = sae.W_dec.norm(dim=-1)
            pre = pre * self._dec_norm
        values, indices = torch.topk(pre, k=k, dim=-1, sorted=False)
        return values.relu(), indices

    @torch.no_grad()
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        encoded: torch.Tensor = self.sae.encode(x)
        return encoded


def load_disk(path: Path) -> SaeLensSae:
    from sae_lens import SAE

    if not path.is_dir():
        raise InputError("sae-lens SAE directory not found", path=str(path))
    if not (path / "cfg.json").is_file():
        raise InputError("not an sae-lens SAE directory (no cfg.json)", path=str(path))
    try:
        sae = SAE.load_from_disk(str(path), device="cpu")
    except (ValueError, KeyError) as exc:  # unknown architecture, missing tensors
        raise InputError(f"cannot load this SAE: {exc}", path=str(path)) from exc
    weights = path / "sae_weights.safetensors"
    fingerprint = file_fingerprint(weights) if weights.is_file() else None
    return SaeLensSae(sae, backend="saelens-disk", source=str(path), fingerprint=fingerprint)


def load_pretrained(release: str, sae_id: str) -> SaeLensSae:  # pragma: no cover - needs the hub
    from sae_lens import SAE

    try:
        sae = SAE.from_pretrained(release, sae_id, device="cpu")
    except Exception as exc:
        raise InputError(f"cannot load sae-lens release {release!r}, id {sae_id!r}: {exc}") from exc
    if isinstance(sae, tuple):  # older sae-lens returned (sae, cfg, sparsity)
        sae = sae[0]
    return SaeLensSae(sae, backend="saelens", source=f"{release}@{sae_id}")
