"""What the run manifest records of a resolved reader: model, layer, dtype and device, the SAE, the token
policy, and every batching and compile decision with its reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from cg_ray.hardware import hardware_info

if TYPE_CHECKING:
    import torch

    from cg_ray.activations.compile_plan import CompileDecision
    from cg_ray.activations.config import ReaderConfig
    from cg_ray.activations.model import LoadedModel
    from cg_ray.activations.path_plan import PathDecision
    from cg_ray.activations.saes import SaeEncoder
    from cg_ray.activations.tokens import TokenPolicy


class ResolvedReader(Protocol):
    """What the manifest reads of a resolved reader (`reader.ConceptReader`): named here, not imported, so
    that reader.py imports this module and not the other way round (issue #48, no circles)."""

    config: ReaderConfig
    model: LoadedModel
    sae: SaeEncoder
    policy: TokenPolicy
    path_decision: PathDecision
    compile_decision: CompileDecision | None
    device: torch.device
    dtype: torch.dtype
    stats: dict[str, float]
    n_layers: int
    layer: int
    token_budget: int
    packed: bool
    compiled: bool
    kernel: str | None
    packing_off: str | None
    fallback: str | None
    padded_attention: str


def describe_reader(reader: ResolvedReader) -> dict[str, Any]:
    """The resolved reader, for the run manifest."""
    info = reader.sae.info
    return {
        "model": reader.model.source,
        "n_layers": reader.n_layers,
        "layer": reader.layer,
        "hook": f"decoder layer {reader.layer} output (forward stopped there)",
        "dtype": str(reader.dtype).removeprefix("torch."),  # `auto` resolved for this hardware
        "device": str(reader.device),
        "hardware": hardware_info().as_dict(),
        "sae": {
            "spec": reader.config.sae,
            "backend": info.backend,
            "source": info.source,
            "architecture": info.architecture,
            "d_in": info.d_in,
            "d_sae": info.d_sae,
            "weights_sha256": info.fingerprint,
        },
        "tokens": reader.policy.describe(),
        "token_budget": reader.token_budget,
        "packing": reader.packed,
        "packing_off": reader.packing_off,  # why rows were padded, when they were
        "packed_attention": reader.kernel,  # sdpa | flex, when packed
        "padded_attention": None if reader.packed else reader.padded_attention,
        "packing_decision": reader.path_decision.describe(),  # what `packing` chose and why
        "packing_fallback": reader.fallback,  # why the flex path was left for padded batches, if it was
        "mask_build_ms_per_batch": (
            round(1e3 * reader.stats["mask_seconds"] / reader.stats["mask_batches"], 3)
            if reader.stats["mask_batches"]
            else None
        ),
        "share_prefixes": reader.packed and reader.config.share_prefixes,
        "compile": reader.config.compile,
        "compiled": reader.compiled,
        "compile_decision": None if reader.compile_decision is None else reader.compile_decision.describe(),
        "max_tokens": reader.config.max_tokens,
        "padding_side": reader.config.padding_side,
    }
