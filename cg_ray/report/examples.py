"""Example rows for a few concepts: the rows where each concept is most salient (largest s̃).

One streaming pass over rows.parquet, keeping only the elements of the requested concepts, so the cost is
a read of the file and memory stays small.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray.artifacts.rows import RowsFile, iter_row_batches

TEXT_COLUMNS = ("prompt", "response", "text")


@dataclass(frozen=True)
class ExampleRow:
    row_id: str
    benchmark: str
    score: float | None
    activation: float  # s̃ of the concept in this row
    text: str | None  # prompt/response snippet when rows.parquet carries text


def salient_rows(
    rows: RowsFile, concepts: list[int], per_concept: int = 3, model: str | None = None
) -> dict[int, list[ExampleRow]]:
    """The `per_concept` rows with the largest s̃ for each concept, largest first."""
    if not concepts:
        return {}
    wanted = np.zeros(rows.d_sae, dtype=bool)
    wanted[concepts] = True
    found_concept, found_act, found_row = [], [], []
    row_keys: list[pa.Table] = []
    n_seen = 0
    for batch in iter_row_batches(rows, model=model):
        hit = wanted[batch.concept_ids]
        if hit.any():
            row_of = np.repeat(np.arange(len(batch)), np.diff(batch.offsets))
            found_concept.append(batch.concept_ids[hit])
            found_act.append(batch.concept_acts[hit])
            found_row.append(row_of[hit] + n_seen)
        names = np.asarray(batch.benchmark_names, dtype=object)[batch.benchmark_codes]
        scores = pa.array(batch.scores, pa.float64(), from_pandas=True)
        row_keys.append(pa.table({"row_id": batch.row_ids, "benchmark": pa.array(names, pa.string()), "score": scores}))
        n_seen += len(batch)
    if not found_concept:
        return {c: [] for c in concepts}
    concept_arr = np.concatenate(found_concept)
    act_arr = np.concatenate(found_act)
    row_arr = np.concatenate(found_row)
    keys = pa.concat_tables(row_keys)
    tops = {}
    for c in concepts:
        sel = np.flatnonzero(concept_arr == c)
        tops[c] = sel[np.argsort(-act_arr[sel], kind="stable")[:per_concept]]
    chosen = sorted({int(row_arr[i]) for top in tops.values() for i in top})
    texts = _texts(rows, chosen) if model is None else {}  # a model filter shifts row positions
    out: dict[int, list[ExampleRow]] = {}
    for c, top in tops.items():
        out[c] = [
            ExampleRow(
                row_id=keys["row_id"][int(r)].as_py(),
                benchmark=keys["benchmark"][int(r)].as_py(),
                score=keys["score"][int(r)].as_py(),
                activation=float(a),
                text=texts.get(int(r)),
            )
            for r, a in zip(row_arr[top], act_arr[top], strict=True)
        ]
    return out


def _texts(rows: RowsFile, positions: list[int]) -> dict[int, str | None]:
    """Text of the given rows, when rows.parquet carries text columns (optional; the pipeline writes them)."""
    present = [c for c in TEXT_COLUMNS if c in rows.parquet.schema_arrow.names]
    if not present or not positions:
        return {}
    table = pq.read_table(rows.path, columns=present).take(pa.array(positions))
    columns = [table[c].to_pylist() for c in present]
    return {
        pos: " | ".join(str(v) for v in values if v) or None
        for pos, values in zip(positions, zip(*columns, strict=True), strict=True)
    }
