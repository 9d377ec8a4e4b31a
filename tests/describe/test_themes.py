"""Theme grouping recovers planted co-activation structure; support and mean score are exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray.artifacts.rows import open_rows
from cg_ray.describe.evidence import scan
from cg_ray.describe.themes import group, jaccard, theme_rows

from .conftest import planted_rows, rows_schema


def test_jaccard_from_counts() -> None:
    co = np.array([[10, 5], [5, 8]])
    assert jaccard(co)[0, 1] == 5 / 13


def test_planted_groups_are_recovered(tmp_path: Path) -> None:
    rows = planted_rows(900)
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=rows_schema()), path)
    rf = open_rows(path)
    ids = list(range(12))
    ev = scan(rf, ids)
    groups = [sorted(ev.concept_ids[i] for i in g) for g in group(ev.co_active)]
    assert [1, 2, 3] in groups and [4, 5] in groups
    assert all(len(g) >= 2 for g in groups)
    assert not any(c in g for g in groups for c in range(6, 12))  # random concepts stay unthemed
    stats = theme_rows(rf, [[1, 2, 3], [4, 5]])
    for members, st in zip(([1, 2, 3], [4, 5]), stats, strict=True):
        support = [r for r in rows if set(r["concept_ids"]) & set(members)]
        assert st.support == len(support)
        assert np.isclose(st.mean_score, np.mean([r["score"] for r in support]))
        best = max(
            support,
            key=lambda r: sum(a for c, a in zip(r["concept_ids"], r["concept_acts"], strict=True) if c in members),
        )
        assert rows[st.representative[0][0]]["row_id"] == best["row_id"]
