"""SAEs stored as plain tensors: Gemma-Scope `params.npz`, Goodfire `.pth` state dicts, safetensors.

Weights are read without unpickling anything (`np.load(allow_pickle=False)`,
`torch.load(weights_only=True)`, safetensors), then wrapped in our `DenseSae`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from cg_ray.activations.saes.base import SaeInfo, file_fingerprint
from cg_ray.activations.saes.dense import Architecture, DenseSae
from cg_ray.errors import InputError


def _require(tensors: dict[str, torch.Tensor], names: tuple[str, ...], path: Path) -> None:
    missing = [n for n in names if n not in tensors]
    if missing:
        raise InputError(f"missing tensors {missing}; found {sorted(tensors)}", path=str(path), field=missing[0])


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise InputError("SAE file not found", path=str(path))


def load_npz(path: Path) -> DenseSae:
    """Gemma Scope: W_enc (d_in, d_sae), b_enc, threshold, W_dec (d_sae, d_in), b_dec — JumpReLU."""
    _check_file(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            tensors = {k: torch.from_numpy(np.asarray(npz[k], dtype=np.float32)) for k in npz.files}
    except (ValueError, OSError) as exc:
        raise InputError(f"cannot read npz: {exc}", path=str(path)) from exc
    _require(tensors, ("W_enc", "b_enc", "threshold", "b_dec"), path)
    d_in, d_sae = tensors["W_enc"].shape
    info = SaeInfo(
        backend="npz",
        source=str(path),
        fingerprint=file_fingerprint(path),
        architecture="jumprelu",
        d_in=d_in,
        d_sae=d_sae,
    )
    return DenseSae(
        W_enc=tensors["W_enc"],
        b_enc=tensors["b_enc"],
        b_dec=tensors["b_dec"],
        threshold=tensors["threshold"],
        architecture="jumprelu",
        info=info,
    )


def load_goodfire_pth(path: Path) -> DenseSae:
    """Goodfire: encoder_linear.{weight (d_sae, d_in), bias}, decoder_linear.{weight, bias} — ReLU.

    Goodfire's encoder reads the raw residual (no decoder-bias subtraction)."""
    _check_file(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # weights_only refuses pickled objects: report, never fall back
        raise InputError(f"cannot read the state dict safely: {exc}", path=str(path)) from exc
    if not isinstance(state, dict):
        raise InputError("expected a state dict", path=str(path))
    tensors = {k: v.float() for k, v in state.items() if isinstance(v, torch.Tensor)}
    _require(tensors, ("encoder_linear.weight", "encoder_linear.bias", "decoder_linear.bias"), path)
    W_enc = tensors["encoder_linear.weight"].T.contiguous()
    d_in, d_sae = W_enc.shape
    info = SaeInfo(
        backend="pth", source=str(path), fingerprint=file_fingerprint(path), architecture="relu", d_in=d_in, d_sae=d_sae
    )
    return DenseSae(
        W_enc=W_enc,
        b_enc=tensors["encoder_linear.bias"],
        b_dec=tensors["decoder_linear.bias"],
        apply_b_dec_to_input=False,
        architecture="relu",
        info=info,
    )


def load_safetensors(
    path: Path,
    *,
    architecture: str | None = None,
    k: int | None = None,
    apply_b_dec_to_input: bool = True,
    rescale_by_decoder_norm: bool = False,
) -> DenseSae:
    """Plain safetensors with sae-lens tensor names: W_enc, b_enc, b_dec, [W_dec], [threshold].

    The architecture is `jumprelu` when a threshold is present, `topk` when k is given, else `relu`."""
    from safetensors.torch import load_file

    _check_file(path)
    try:
        tensors = {k_: v.float() for k_, v in load_file(str(path)).items()}
    except Exception as exc:
        raise InputError(f"cannot read safetensors: {exc}", path=str(path)) from exc
    _require(tensors, ("W_enc", "b_enc", "b_dec"), path)
    arch = architecture or ("jumprelu" if "threshold" in tensors else "topk" if k is not None else "relu")
    if arch not in ("relu", "jumprelu", "topk"):
        raise InputError(f"unknown SAE architecture {arch!r} (relu, jumprelu, topk)", path=str(path))
    if arch == "topk" and k is None:
        raise InputError("a TopK SAE needs k (add ',k=N' to the spec)", path=str(path), field="k")
    d_in, d_sae = tensors["W_enc"].shape
    info = SaeInfo(
        backend="safetensors",
        source=str(path),
        fingerprint=file_fingerprint(path),
        architecture=arch,
        d_in=d_in,
        d_sae=d_sae,
    )
    typed_arch: Architecture = arch  # type: ignore[assignment]
    return DenseSae(
        W_enc=tensors["W_enc"],
        b_enc=tensors["b_enc"],
        b_dec=tensors["b_dec"],
        threshold=tensors.get("threshold"),
        W_dec=tensors.get("W_dec"),
        k=k,
        architecture=typed_arch,
        apply_b_dec_to_input=apply_b_dec_to_input,
        rescale_by_decoder_norm=rescale_by_decoder_norm,
        info=info,
    )
