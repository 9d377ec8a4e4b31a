"""Pipeline test fixtures: offline environment, a small local Ray cluster, the real SmolLM2 (slow).

Everything (Ray's temp dir, vLLM caches, TMPDIR, model cache) lives in temporary directories that are
removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import prepared_once


@pytest.fixture(scope="session")
def scratch() -> Iterator[Path]:
    """A short path under /tmp (Ray's unix sockets limit path length); removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="cgp-", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def offline_env(scratch: Path) -> Iterator[dict[str, str]]:
    """No network, and every cache / temp file under `scratch` (restored afterwards)."""
    env = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(scratch / "hf"),
        "XDG_CACHE_HOME": str(scratch / "xdg"),  # torch/vLLM write kernel caches under ~/.cache otherwise
        "TORCH_HOME": str(scratch / "torch"),
        "VLLM_CACHE_ROOT": str(scratch / "vllm"),
        "VLLM_RPC_BASE_PATH": str(scratch / "rpc"),
        "TMPDIR": str(scratch / "tmp"),
        "RAY_AUTH_MODE": "disabled",
        "RAY_DATA_DISABLE_PROGRESS_BARS": "1",
        "WANDB_MODE": "disabled",
    }
    for key in ("rpc", "tmp"):
        (scratch / key).mkdir(exist_ok=True)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def ray_local(offline_env: dict[str, str], scratch: Path) -> Iterator[Any]:
    """One in-process Ray cluster (2 CPUs) per test module; workers inherit `offline_env`. Shut down after
    the module, so other test folders can start clusters of their own."""
    import ray

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(scratch / "ray"),
        runtime_env={"env_vars": offline_env},
        logging_level="WARNING",
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def smollm_dir(offline_env: dict[str, str]) -> Path:
    """The real evaluated model, prepared once in cg_ray's cache (tests/conftest.py prepared_once)."""
    return prepared_once()
