"""A small run directory with planted structure: metadata, texts, co-activating concepts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import cli
from cg_ray import schemas as S

D_SAE = 12
TASKS = ("algebra", "geometry", "poetry")


def planted_rows(n: int = 600, seed: int = 0) -> list[dict[str, Any]]:
    """Concept 0 fires on geometry rows (which score low); concepts 1, 2 and 3 fire together on algebra rows (and
    a few more), concepts 4 and 5 together on every fifth row; 6..11 fire at random."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        task = TASKS[i % 3]
        acts: dict[int, float] = {}
        if task == "geometry" and rng.random() < 0.8:
            acts[0] = float(rng.uniform(1, 5))
        if i % 3 == 0 or (i % 7 == 1):
            for c in (1, 2, 3):
                if rng.random() < 0.9:
                    acts[c] = float(rng.uniform(0.5, 2))
        if i % 5 == 0:
            for c in (4, 5):
                acts[c] = float(rng.uniform(0.5, 2))
        for c in range(6, D_SAE):
            if rng.random() < 0.2:
                acts[c] = float(rng.uniform(0.1, 1))
        ids = sorted(acts)
        score = float(rng.random() < (0.2 if 0 in acts else 0.7))
        meta: dict[str, Any] = {"task": task, "level": int(rng.integers(1, 4)), "index": i}
        if i == 5:
            meta["extra"] = {"nested": True}
        rows.append(
            {
                "row_id": f"r{i}",
                "benchmark": "toy",
                "model": "m",
                "score": score,
                "n_tokens": 10,
                "concept_ids": ids,
                "concept_acts": [acts[c] for c in ids],
                "prompt": f"row {i} about {task}: " + " ".join(f"w{c}" for c in ids),
                "response": None,
                S.METADATA: json.dumps(meta),
            }
        )
    return rows


def rows_schema() -> pa.Schema:
    schema = S.rows_schema_with_d_sae(D_SAE)
    return (
        schema.append(pa.field("prompt", pa.string()))
        .append(pa.field("response", pa.string()))
        .append(S.METADATA_FIELD)
    )


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    """make_run(rows=None, labels=None, adjust_for="none") -> a run directory made by `cg-ray metrics`."""

    def make(
        rows: list[dict[str, Any]] | None = None, labels: dict[int, str] | None = None, adjust_for: str = "none"
    ) -> Path:
        table = pa.Table.from_pylist(rows if rows is not None else planted_rows(), schema=rows_schema())
        rows_path = tmp_path / "rows.parquet"
        pq.write_table(table, rows_path, row_group_size=128)
        args = ["metrics", "--rows", str(rows_path), "--out", str(tmp_path / "run"), "--min-rows", "5"]
        args += ["--adjust-for", adjust_for]  # "none": these tests are about the enrichment itself
        if labels is not None:
            label_path = tmp_path / "labels.jsonl"
            label_path.write_text("".join(json.dumps({"concept_id": c, "label": t}) + "\n" for c, t in labels.items()))
            args += ["--labels", str(label_path)]
        assert cli.main(args) == 0
        return tmp_path / "run"

    return make
