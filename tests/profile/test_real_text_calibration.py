"""scripts/real_text_calibration.py's `plant` on a tiny synthetic rows table (no reader): the planted scores
follow the cells' base rates, the property lowers them by DROP, and `--shuffle` permutes them within cells."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.scripts import load_script

rtc = load_script("real_text_calibration")


def _rows(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    sources = rng.choice(["a", "b"], n)
    lengths = rng.choice(["short", "long"], n)
    prompts = [f"It costs ${i % 90 + 1} today." if i % 10 == 0 else f"Question {i}?" for i in range(n)]
    return pa.table(
        {
            "row_id": [f"r{i}" for i in range(n)],
            "benchmark": sources.tolist(),
            "model": ["x"] * n,
            "score": pa.array([None] * n, pa.float64()),
            "concept_ids": [[i % 5] for i in range(n)],
            "prompt": prompts,
            "metadata": [json.dumps({"length": str(v), "group": f"g{i}"}) for i, v in enumerate(lengths)],
        }
    )


def test_planted_scores_follow_base_rates_and_the_drop() -> None:
    table = _rows(40_000)
    cell = rtc.cells(table)
    prop = rtc.has_property(table)
    assert prop.mean() == 0.1 and len(set(cell)) == 4
    scores = rtc.planted_scores(cell, prop, seed=3)
    assert set(np.unique(scores)) <= {0.0, 1.0}
    codes = np.array(cell)
    gaps = []
    for c in sorted(set(cell)):
        plain = scores[(codes == c) & ~prop].mean()
        assert rtc.BASE_LOW - 0.02 <= plain <= rtc.BASE_HIGH + 0.02
        gaps.append(plain - scores[(codes == c) & prop].mean())
    assert abs(np.mean(gaps) - rtc.DROP) < 0.04
    np.testing.assert_array_equal(scores, rtc.planted_scores(cell, prop, seed=3))  # seeded
    assert not np.array_equal(scores, rtc.planted_scores(cell, prop, seed=4))


def test_shuffle_permutes_within_cells_and_erases_the_property() -> None:
    table = _rows(40_000)
    cell, prop = rtc.cells(table), rtc.has_property(table)
    planted = rtc.planted_scores(cell, prop, seed=1)
    null = rtc.planted_scores(cell, prop, seed=1, shuffle=True)
    codes = np.array(cell)
    for c in set(cell):
        assert planted[codes == c].sum() == null[codes == c].sum()  # the same scores, moved within the cell
        in_cell = codes == c
        assert abs(null[in_cell & prop].mean() - null[in_cell & ~prop].mean()) < 0.06


def test_plant_writes_the_scores_and_keeps_the_rest(tmp_path: Path) -> None:
    src, out = tmp_path / "rows.parquet", tmp_path / "planted.parquet"
    pq.write_table(_rows(200), src)
    rtc.plant(src, out, seed=0, shuffle=True)
    table = pq.read_table(out)
    assert table.column("model").to_pylist() == ["shuffled-s0"] * 200
    assert table.column("score").null_count == 0
    assert table.column("prompt").equals(pq.read_table(src).column("prompt"))
    assert not list(tmp_path.glob("*.tmp*"))


def test_assemble_takes_each_rows_concepts_from_the_files_read(tmp_path: Path) -> None:
    rows = _rows(30)
    for k, name in enumerate(rtc.READ):
        pq.write_table(rows.slice(10 * k, 10), tmp_path / f"{name}.rows.parquet")
    wanted = [
        {"id": f"r{i}", "benchmark": "s", "prompt": "p", "metadata": {"length": "short", "group": f"g{i // 2}"}}
        for i in (29, 0, 15)
    ]
    (tmp_path / "real_text.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wanted), encoding="utf-8")
    rtc.assemble(tmp_path)
    table = pq.read_table(tmp_path / "real_text.rows.parquet")
    assert table.column("row_id").to_pylist() == ["r29", "r0", "r15"]
    assert table.column("concept_ids").to_pylist() == [[29 % 5], [0], [0]]
    assert table.column("prompt").to_pylist() == [rows.column("prompt")[i].as_py() for i in (29, 0, 15)]
    assert [json.loads(m)["group"] for m in table.column("metadata").to_pylist()] == ["g14", "g0", "g7"]
    assert table.column("score").null_count == 3 and set(table.column("benchmark").to_pylist()) == {"s"}
