"""The Python API: `read_run(path) -> Run`, a published run directory as typed objects and DataFrames
(docs/api.md). `import cg_ray` exposes it lazily as `cg_ray.read_run`."""

from cg_ray.api.analyses import Augment, Probe, Robustness, Scope, Sensitivity
from cg_ray.api.run import FORMAT_VERSION, Run, read_run

__all__ = ["FORMAT_VERSION", "Augment", "Probe", "Robustness", "Run", "Scope", "Sensitivity", "read_run"]
