"""cg_ray: competency gaps of language models and benchmarks from SAE concepts."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["Run", "__version__", "read_run"]

_API = frozenset({"Run", "read_run"})


def __getattr__(name: str) -> Any:
    """`cg_ray.read_run` / `cg_ray.Run` (cg_ray.api, docs/api.md), imported on first use: `import cg_ray`
    loads nothing else. By name, not by an import statement: every module reads `cg_ray.__version__`, and
    an import here would count, for the import contracts, as each of them importing the jobs layer."""
    if name in _API:
        return getattr(importlib.import_module("cg_ray.api"), name)
    raise AttributeError(f"module 'cg_ray' has no attribute {name!r}")
