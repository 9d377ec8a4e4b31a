"""cg_ray: competency gaps of language models and benchmarks from SAE concepts."""

__version__ = "0.1.0"
