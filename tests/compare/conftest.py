"""Run directories for diff tests, built cheaply: rows.parquet from arrays, then `publish_metrics`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.config import MetricsConfig
from cg_ray.run_outputs import publish_metrics
from tests.activations.conftest import _offline_env, tiny_model_dir, tiny_sae_dir  # noqa: F401 (reader fixtures)

D_SAE = 12
READER = {"model": "smollm2-135m-instruct", "sae": "default", "layer": None, "text": "prompt"}


def write_run(
    path: Path,
    row_ids: list[str],
    benchmarks: list[str],
    scores: list[float | None],
    concepts: list[dict[int, float]],
    *,
    d_sae: int = D_SAE,
    reader: dict[str, Any] | None = READER,
    sae_weights: str | None = None,
) -> Path:
    """A published run directory; `reader` (None: none recorded) goes into manifest.json as `cg-ray run` does."""
    path.mkdir(parents=True)
    table = pa.table(
        {
            "row_id": row_ids,
            "benchmark": benchmarks,
            "model": ["m"] * len(row_ids),
            "score": pa.array(scores, pa.float64()),
            "n_tokens": pa.array([10] * len(row_ids), pa.int32()),
            "concept_ids": pa.array([sorted(c) for c in concepts], pa.list_(pa.int32())),
            "concept_acts": pa.array([[c[k] for k in sorted(c)] for c in concepts], pa.list_(pa.float32())),
        },
        schema=S.rows_schema_with_d_sae(d_sae),
    )
    pq.write_table(table, path / S.ROWS_FILE)
    publish_metrics(RunDir(path), MetricsConfig(min_rows=1))
    if reader is not None:
        resolved: dict[str, Any] = {"d_sae": d_sae, "actors": [{"device": "cpu", "sae_weights": sae_weights}]}
        manifest = {"cg_ray_version": "test", "config": {"reader": reader}, "reader": resolved}
        manifest |= {"counts": {}, "stages": {}}
        (path / S.MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")
    return path


def planted(n: int = 400, seed: int = 0) -> dict[str, Any]:
    """Two benchmarks; each row has 3 random concepts of 0..7 plus concept 9 (40% of rows) or 10 (30%).

    Run A: right with probability 0.7. Run B: the same rows, except concept 9's rows are all wrong and
    concept 10's rows all right — 9 regressed, 10 improved, the rest only through overlap.
    """
    rng = np.random.default_rng(seed)
    concepts = []
    has9 = rng.random(n) < 0.4
    has10 = ~has9 & (rng.random(n) < 0.5)
    for i in range(n):
        chosen = {int(c): float(rng.uniform(0.2, 2.0)) for c in rng.choice(8, size=3, replace=False)}
        if has9[i]:
            chosen[9] = float(rng.uniform(0.5, 2.0))
        if has10[i]:
            chosen[10] = float(rng.uniform(0.5, 2.0))
        concepts.append(chosen)
    a = (rng.random(n) < 0.7).astype(float)
    b = a.copy()
    b[has9] = 0.0
    b[has10] = 1.0
    return {
        "row_ids": [f"r{i}" for i in range(n)],
        "benchmarks": ["alpha" if i % 2 else "beta" for i in range(n)],
        "a": a.tolist(),
        "b": b.tolist(),
        "concepts": concepts,
        "has9": has9,
        "has10": has10,
    }


@pytest.fixture
def planted_runs(tmp_path: Path) -> Callable[..., tuple[Path, Path]]:
    def _make(**overrides: Any) -> tuple[Path, Path]:
        p = planted()
        reader_b = overrides.pop("reader_b", READER)
        ra = write_run(tmp_path / "A", p["row_ids"], p["benchmarks"], p["a"], p["concepts"], **overrides)
        rb = write_run(tmp_path / "B", p["row_ids"], p["benchmarks"], p["b"], p["concepts"], reader=reader_b)
        return ra, rb

    return _make
