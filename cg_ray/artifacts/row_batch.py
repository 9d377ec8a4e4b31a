"""One validated batch of rows.parquet (`RowBatch`), the opened file (`RowsFile`), and the checks that
turn a raw Arrow batch into a `RowBatch`: every check is vectorized and reports the first offending row
(0-based over the whole file) and field."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.errors import InputError

_EXPECTED_TYPES: dict[str, pa.DataType] = {f.name: f.type for f in S.ROWS_SCHEMA}


@dataclass
class RowBatch:
    """One validated batch in CSR form (offsets start at 0)."""

    first_row: int  # file row index of this batch's first row
    row_ids: pa.Array
    benchmark_codes: npt.NDArray[np.int32]
    benchmark_names: list[str]
    scores: npt.NDArray[np.float64]  # NaN = unscored
    n_tokens: npt.NDArray[np.int32]  # 0 when the file has no n_tokens column
    offsets: npt.NDArray[np.int64]
    concept_ids: npt.NDArray[np.int32]
    concept_acts: npt.NDArray[np.float32]

    def __len__(self) -> int:
        return len(self.scores)


@dataclass
class RowsFile:
    """An opened rows.parquet: its path, SAE width, and the evaluated model(s) found in it."""

    path: Path
    parquet: pq.ParquetFile
    d_sae: int
    n_rows: int
    has_model_column: bool
    columns: list[str]
    metadata: dict[str, str] = field(default_factory=dict)


def _first(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def cast_column(column: pa.Array | pa.ChunkedArray, name: str, rows: RowsFile, first_row: int) -> pa.Array:
    """A rows.parquet column as its schema type; a clear error naming the file and field when it cannot be."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    expected = _EXPECTED_TYPES[name]
    if array.type == expected:
        return array
    try:
        return pc.cast(array, expected, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputError(
            f"has type {array.type}, expected {expected} ({exc})", path=str(rows.path), field=name
        ) from None


def _check_no_nulls(array: pa.Array, name: str, rows: RowsFile, first_row: int) -> None:
    if array.null_count:
        nulls = np.asarray(array.is_null().to_numpy(zero_copy_only=False))
        raise InputError("is null", path=str(rows.path), row=first_row + _first(nulls), field=name)


def _list_parts(
    array: pa.ListArray, name: str, rows: RowsFile, first_row: int
) -> tuple[npt.NDArray[np.int64], np.ndarray]:
    offsets = array.offsets.to_numpy().astype(np.int64)
    values = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    offsets -= offsets[0]
    if values.null_count:
        bad = _first(np.asarray(values.is_null().to_numpy(zero_copy_only=False)))
        row = int(np.searchsorted(offsets, bad, side="right") - 1)
        raise InputError("contains a null element", path=str(rows.path), row=first_row + row, field=name)
    return offsets, values.to_numpy()


def _check_unique_ids(
    offsets: npt.NDArray[np.int64], ids: npt.NDArray[np.int32], rows: RowsFile, first_row: int
) -> None:
    """Concept ids must not repeat within a row. Sorted rows (what our reader writes) pass in O(n)."""
    if ids.size < 2:
        return
    starts = np.zeros(ids.size, dtype=bool)
    starts[offsets[:-1][np.diff(offsets) > 0]] = True
    increasing = (ids[1:] > ids[:-1]) | starts[1:]
    if increasing.all():
        return
    row_of = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    order = np.lexsort((ids, row_of))
    sorted_ids, sorted_rows = ids[order], row_of[order]
    dup = (sorted_ids[1:] == sorted_ids[:-1]) & (sorted_rows[1:] == sorted_rows[:-1])
    if dup.any():
        k = _first(dup)
        raise InputError(
            f"concept id {int(sorted_ids[k])} appears more than once in the row",
            path=str(rows.path),
            row=first_row + int(sorted_rows[k]),
            field=S.CONCEPT_IDS,
        )


def _checked_scores(score: pa.Array, path: str, first_row: int) -> npt.NDArray[np.float64]:
    """Scores as float64 (null: NaN, an unscored row); a NaN that is not null or a value outside [0, 1] fails."""
    scores: npt.NDArray[np.float64] = score.to_numpy(zero_copy_only=False).astype(np.float64)
    is_null = np.asarray(score.is_null().to_numpy(zero_copy_only=False))
    nan_not_null = np.isnan(scores) & ~is_null
    if nan_not_null.any():
        raise InputError(
            "is NaN (use null for an unscored row)",
            path=path,
            row=first_row + _first(nan_not_null),
            field=S.SCORE,
        )
    out_of_range = ~is_null & ((scores < 0) | (scores > 1))
    if out_of_range.any():
        k = _first(out_of_range)
        raise InputError(f"{scores[k]!r} is outside [0, 1]", path=path, row=first_row + k, field=S.SCORE)
    return scores


def _check_concept_values(
    id_offsets: npt.NDArray[np.int64], ids: np.ndarray, acts: np.ndarray, rows: RowsFile, first_row: int
) -> None:
    """Concept ids inside [0, d_sae), unique per row; activations finite and non-negative."""
    path = str(rows.path)

    def row_of(elem_mask: npt.NDArray[np.bool_]) -> int:
        return first_row + int(np.searchsorted(id_offsets, _first(elem_mask), side="right") - 1)

    bad_id = (ids < 0) | (ids >= rows.d_sae)
    if bad_id.any():
        value = int(ids[_first(bad_id)])
        raise InputError(
            f"concept id {value} is outside [0, d_sae={rows.d_sae})",
            path=path,
            row=row_of(bad_id),
            field=S.CONCEPT_IDS,
        )
    not_finite = ~np.isfinite(acts)
    if not_finite.any():
        raise InputError(
            "contains a NaN or infinite activation",
            path=path,
            row=row_of(not_finite),
            field=S.CONCEPT_ACTS,
        )
    negative = acts < 0
    if negative.any():
        raise InputError(
            f"contains a negative activation ({float(acts[_first(negative)])!r})",
            path=path,
            row=row_of(negative),
            field=S.CONCEPT_ACTS,
        )
    _check_unique_ids(id_offsets, ids, rows, first_row)


def validate_batch(table: pa.Table, rows: RowsFile, first_row: int) -> RowBatch:
    path = str(rows.path)
    names = [c for c in rows.columns if c != S.MODEL]
    cols = {name: cast_column(table.column(name), name, rows, first_row) for name in names}
    for name in names:
        if name != S.SCORE:
            _check_no_nulls(cols[name], name, rows, first_row)

    empty = pc.equal(pc.utf8_length(cols[S.BENCHMARK]), 0).to_numpy(zero_copy_only=False)
    if empty.any():
        raise InputError("is empty", path=path, row=first_row + _first(empty), field=S.BENCHMARK)

    scores = _checked_scores(cols[S.SCORE], path, first_row)

    if S.N_TOKENS in cols:
        n_tokens = cols[S.N_TOKENS].to_numpy()
        if (neg := n_tokens < 0).any():
            raise InputError("is negative", path=path, row=first_row + _first(neg), field=S.N_TOKENS)
    else:
        n_tokens = np.zeros(table.num_rows, dtype=np.int32)

    id_offsets, ids = _list_parts(cols[S.CONCEPT_IDS], S.CONCEPT_IDS, rows, first_row)
    act_offsets, acts = _list_parts(cols[S.CONCEPT_ACTS], S.CONCEPT_ACTS, rows, first_row)
    if not np.array_equal(id_offsets, act_offsets):
        k = _first(np.diff(id_offsets) != np.diff(act_offsets))
        raise InputError(
            f"has {int(np.diff(act_offsets)[k])} values but concept_ids has {int(np.diff(id_offsets)[k])}",
            path=path,
            row=first_row + k,
            field=S.CONCEPT_ACTS,
        )

    if ids.size:
        _check_concept_values(id_offsets, ids, acts, rows, first_row)

    encoded = pc.dictionary_encode(cols[S.BENCHMARK])
    return RowBatch(
        first_row=first_row,
        row_ids=cols[S.ROW_ID],
        benchmark_codes=encoded.indices.to_numpy().astype(np.int32),
        benchmark_names=encoded.dictionary.to_pylist(),
        scores=scores,
        n_tokens=n_tokens.astype(np.int32),
        offsets=id_offsets,
        concept_ids=ids.astype(np.int32, copy=False),
        concept_acts=acts.astype(np.float32, copy=False),
    )
