"""SAE backends behind one small Protocol (`SaeEncoder`); `load_sae(spec)` picks one from a spec string."""

from cg_ray.activations.saes.base import SaeEncoder
from cg_ray.activations.saes.spec import SaeSpec, load_sae, parse_sae_spec

__all__ = ["SaeEncoder", "SaeSpec", "load_sae", "parse_sae_spec"]
