"""Shared fixtures: real offline data location, rows.parquet builders."""

from __future__ import annotations

import os
import shutil
import tempfile
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
    yield
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)
