"""Loading a causal LM's base model and capturing decoder layer L's output, with the rest cut off.

The forward stops at layer L: the layer list is truncated to L+1 blocks and we run the base model (no
LM head). We read layer L's output from a forward hook, never `last_hidden_state`, which has the final
norm applied.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from cg_ray.activations.packed import NO_MASK
from cg_ray.errors import ConfigError, InputError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LoadedModel:
    base: Any  # the base transformer (e.g. LlamaModel), no LM head
    tokenizer: PreTrainedTokenizerBase
    source: str
    hidden_size: int
    n_layers: int  # before truncation


def text_config(base: Any) -> Any:
    """The language model's config (a multimodal model nests it; a plain one is its own)."""
    return base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _looks_local(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~")) or spec.endswith(".gguf") or Path(spec).exists()


def load_model(spec: str | Path, dtype: str, device: torch.device) -> LoadedModel:
    """Local HF directory, GGUF file, or hub id (the last only through the normal from_pretrained path).
    `dtype` may be "auto": resolved for `device` by cg_ray.hardware."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    from cg_ray.hardware import resolve_dtype

    text = str(spec)
    torch_dtype = _DTYPES[resolve_dtype(dtype, device)]
    base: Any
    path = Path(text).expanduser()
    if _looks_local(text):
        if not path.exists():
            raise InputError("model path not found", path=text)
        if path.is_file() and path.suffix == ".gguf":
            # transformers dequantizes GGUF to a full causal LM; keep only its base model.
            full = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch_dtype)
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            base = full.get_decoder() if hasattr(full, "get_decoder") else full.base_model
        elif path.is_dir() and (path / "config.json").is_file():
            base = AutoModel.from_pretrained(str(path), dtype=torch_dtype)
            tokenizer = AutoTokenizer.from_pretrained(str(path))
        else:
            raise InputError("not a model directory (no config.json) nor a .gguf file", path=text)
    else:  # pragma: no cover - hub ids are not reachable in tests
        try:
            base = AutoModel.from_pretrained(text, dtype=torch_dtype)
            tokenizer = AutoTokenizer.from_pretrained(text)
        except OSError as exc:
            raise InputError(f"cannot load model {text!r}: {exc}") from exc
    base = base.to(device).eval()
    layers = decoder_layers(base)
    config = text_config(base)
    return LoadedModel(
        base=base, tokenizer=tokenizer, source=text, hidden_size=int(config.hidden_size), n_layers=len(layers)
    )


def decoder_layers(base: torch.nn.Module) -> torch.nn.ModuleList:
    for attr in ("layers", "h", "blocks"):
        layers = getattr(base, attr, None)
        if isinstance(layers, torch.nn.ModuleList):
            return layers
    raise ConfigError(f"cannot find the decoder layers of {type(base).__name__}")


def truncate(base: PreTrainedModel, layer: int) -> None:
    """Keep blocks 0..layer only; later blocks are never run (and their memory is freed)."""
    layers = decoder_layers(base)
    if not 0 <= layer < len(layers):
        raise ConfigError(f"layer {layer} is out of range: the model has {len(layers)} decoder layers")
    for attr in ("layers", "h", "blocks"):
        if getattr(base, attr, None) is layers:
            setattr(base, attr, layers[: layer + 1])
    # Llama-style models loop over `layers[: config.num_hidden_layers]`; keep both in step.
    config = text_config(base)
    if hasattr(config, "num_hidden_layers"):
        config.num_hidden_layers = layer + 1


class LayerCapture:
    """A forward hook that keeps the latest output of one module (tensor or tuple output)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.output: torch.Tensor | None = None
        self._handle = module.register_forward_hook(self._hook)

    def _hook(self, _module: torch.nn.Module, _inputs: Any, output: Any) -> None:
        # transformers 5 decoder layers return a tensor; older ones (and some models) a tuple.
        self.output = output[0] if isinstance(output, tuple) else output

    def take(self) -> torch.Tensor:
        if self.output is None:
            raise RuntimeError("the hooked layer did not run")
        out, self.output = self.output, None
        return out

    def remove(self) -> None:
        self._handle.remove()


@torch.inference_mode()
def forward_to_layer(
    base: torch.nn.Module, capture: LayerCapture, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """Hidden states after the hooked layer, (batch, seq, d). Positions follow the mask, so left
    padding gives each row the same positions as running it alone."""
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    base(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
    return capture.take()


@torch.inference_mode()
def forward_packed(
    base: torch.nn.Module,
    capture: LayerCapture,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    attention_mask: Any = None,
) -> torch.Tensor:
    """Hidden states after the hooked layer for one packed sequence (1, T, d), positions restarting with
    every row group. `attention_mask`: the flex kernel's BlockMask(s), built before the forward; None for
    the SDPA loop (the NO_MASK placeholder: the attention function reads the row layout)."""
    mask = NO_MASK if attention_mask is None else attention_mask
    base(input_ids=input_ids, attention_mask=mask, position_ids=position_ids, use_cache=False)
    return capture.take()
