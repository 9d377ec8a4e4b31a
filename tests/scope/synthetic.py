"""Synthetic rows for the scope's tests: six background concepts per row among 10..d−1, and each `left_out`
concept independently with probability `left_out_share` (0 for the benchmark that leaves them out)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def scope_rows(
    benchmark: str,
    n: int,
    rng: np.random.Generator,
    left_out_share: float,
    left_out: Iterable[int],
    d: int = 64,
    prompt: str = "{benchmark} question {i}",
) -> list[dict[str, Any]]:
    """Rows dicts for `rows_table` (with a prompt: `prompt` formatted with benchmark, i and the ids)."""
    out = []
    for i in range(n):
        ids = set(rng.choice(np.arange(10, d), size=6, replace=False).tolist())
        ids |= {c for c in left_out if rng.random() < left_out_share}
        ids_sorted = sorted(ids)
        acts = rng.uniform(0.5, 1.5, size=len(ids_sorted)).astype(np.float32).tolist()
        out.append(
            {"row_id": f"{benchmark}-{i}", "benchmark": benchmark, "score": float(rng.random() < 0.5),
             "concept_ids": ids_sorted, "concept_acts": acts,
             "prompt": prompt.format(benchmark=benchmark, i=i, ids=ids_sorted)}
        )  # fmt: skip
    return out
