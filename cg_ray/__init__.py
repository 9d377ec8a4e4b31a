"""cg_ray: competency gaps of language models and benchmarks from SAE concepts."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["Run", "__version__", "probe_run", "read_run", "run"]

# name → (module, attribute): the library's steps, each the one the CLI calls (docs/api.md)
_API = {
    "Run": ("cg_ray.api", "Run"),
    "read_run": ("cg_ray.api", "read_run"),
    "run": ("cg_ray.pipeline.api", "run_suite"),  # `cg-ray run CONFIG`
    "probe_run": ("cg_ray.probe.api", "probe_run"),  # `cg-ray probe RUN` (`cg_ray.probe` is the package)
}


def __getattr__(name: str) -> Any:
    """`cg_ray.read_run` / `cg_ray.Run` / `cg_ray.run` / `cg_ray.probe_run` (docs/api.md), imported on first
    use: `import cg_ray` loads nothing else. By name, not by an import statement: every module reads
    `cg_ray.__version__`, and an import here would count, for the import contracts, as each of them
    importing the jobs layer."""
    if name in _API:
        module, attribute = _API[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'cg_ray' has no attribute {name!r}")
