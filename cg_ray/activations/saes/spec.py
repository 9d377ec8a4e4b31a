"""SAE spec strings: `KIND:LOCATION[,key=value...]`, parsed and validated before any work starts.

  default                                  the SAE shipped with cg_ray for the default reader
  NAME                                     another shipped reader by name (`saes.shipped`: l20-seed7, ...)
  saelens-disk:DIR                         sae-lens `SAE.load_from_disk`
  saelens:RELEASE@SAE_ID                   sae-lens `SAE.from_pretrained` (needs the hub)
  npz:FILE                                 Gemma-Scope params.npz (JumpReLU)
  pth:FILE                                 Goodfire state dict (ReLU), weights_only
  safetensors:FILE[,arch=topk,k=32,rescale=true]  W_enc/b_enc/b_dec[/W_dec/threshold]; rescale:
                                           TopK pre-activations × ‖W_dec row‖ (sae-lens' training default)
A bare existing directory means saelens-disk, a bare *.npz / *.pth / *.safetensors file its kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cg_ray.activations.saes.base import SaeEncoder
from cg_ray.activations.saes.shipped import DEFAULT_READER, SHIPPED_READERS, shipped_reader
from cg_ray.errors import ConfigError

KINDS = ("default", "shipped", "saelens-disk", "saelens", "npz", "pth", "safetensors")
_SUFFIX_KIND = {".npz": "npz", ".pth": "pth", ".pt": "pth", ".safetensors": "safetensors"}
_OPTIONS = {"safetensors": {"arch", "k", "apply_b_dec_to_input", "rescale"}}


@dataclass(frozen=True)
class SaeSpec:
    kind: str
    location: str = ""
    options: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        opts = "".join(f",{k}={v}" for k, v in sorted(self.options.items()))
        if self.kind in ("default", "shipped"):
            return self.location or self.kind
        return f"{self.kind}:{self.location}{opts}"


def default_sae_dir() -> Path:
    return SHIPPED_READERS[DEFAULT_READER].directory


def parse_sae_spec(spec: str) -> SaeSpec:
    spec = spec.strip()
    if not spec:
        raise ConfigError("empty SAE spec")
    if spec == "default":
        return SaeSpec("default")
    if spec in SHIPPED_READERS:
        return SaeSpec("shipped", spec)
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in KINDS:
        path = Path(spec)
        if path.is_dir():
            return SaeSpec("saelens-disk", spec)
        if path.suffix in _SUFFIX_KIND:
            return SaeSpec(_SUFFIX_KIND[path.suffix], spec)
        raise ConfigError(
            f"cannot tell the kind of SAE {spec!r}: name a shipped reader ({', '.join(SHIPPED_READERS)}; "
            f"`cg-ray sae list`) or use one of {', '.join(KINDS)} as KIND:LOCATION"
        )
    location, *opts = rest.split(",")
    options: dict[str, str] = {}
    for opt in opts:
        key, eq, value = opt.partition("=")
        if not eq or key not in _OPTIONS.get(kind, set()):
            raise ConfigError(f"unknown option {opt!r} for SAE kind {kind!r}")
        options[key] = value
    if not location:
        raise ConfigError(f"SAE spec {spec!r} has no location")
    if kind == "saelens" and "@" not in location:
        raise ConfigError(f"sae-lens pretrained spec must be saelens:RELEASE@SAE_ID, got {spec!r}")
    return SaeSpec(kind, location, options)


def load_sae(spec: str | SaeSpec) -> SaeEncoder:
    """Load on the CPU in float32; the reader moves it to the model's device and dtype."""
    from cg_ray.activations.saes import files, saelens

    s = parse_sae_spec(spec) if isinstance(spec, str) else spec
    if s.kind == "default":
        return saelens.load_disk(default_sae_dir())
    if s.kind == "shipped":
        return saelens.load_disk(shipped_reader(s.location).directory)
    if s.kind == "saelens-disk":
        return saelens.load_disk(Path(s.location))
    if s.kind == "saelens":
        release, _, sae_id = s.location.partition("@")
        return saelens.load_pretrained(release, sae_id)
    if s.kind == "npz":
        return files.load_npz(Path(s.location))
    if s.kind == "pth":
        return files.load_goodfire_pth(Path(s.location))
    k = s.options.get("k")
    try:
        k_int = int(k) if k is not None else None
    except ValueError:
        raise ConfigError(f"k must be an integer, got {k!r}") from None
    return files.load_safetensors(
        Path(s.location),
        architecture=s.options.get("arch"),
        k=k_int,
        apply_b_dec_to_input=s.options.get("apply_b_dec_to_input", "true").lower() != "false",
        rescale_by_decoder_norm=s.options.get("rescale", "false").lower() == "true",
    )
