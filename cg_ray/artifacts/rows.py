"""Read and validate rows.parquet in streaming batches.

Every check is vectorized per batch and reports the first offending row (0-based, counted over the whole
file) and field. Validation completes before anything is written, so bad input never leaves output.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.errors import InputError
from cg_ray.metrics.accumulator import CGAccumulator
from cg_ray.metrics.robustness import RowTable

DEFAULT_BATCH_ROWS = 16_384  # measured fastest on 1M × 64 nnz (fits in cache, less RSS)
READ_BUFFER_BYTES = 8 << 20
PROGRESS_EVERY_S = 5.0

log = logging.getLogger(__name__)

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


def open_rows(path: str | os.PathLike[str], d_sae: int | None = None) -> RowsFile:
    """Open rows.parquet and check its schema. `d_sae` overrides/supplies the schema metadata value."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file", path=str(p))
    if p.is_dir():
        raise InputError("is a directory, expected a rows.parquet file", path=str(p))
    try:
        # No pre-buffering: it keeps whole column chunks in memory, which breaks the O(batch) memory bound.
        pf = pq.ParquetFile(p, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"not a Parquet file ({exc})", path=str(p)) from None
    schema = pf.schema_arrow
    for name in S.REQUIRED_ROW_COLUMNS:
        if name not in schema.names:
            raise InputError(f"missing required column (columns present: {schema.names})", path=str(p), field=name)
    meta = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (schema.metadata or {}).items()}
    stored = meta.get(S.D_SAE_METADATA_KEY.decode())
    if d_sae is None:
        if stored is None:
            raise InputError(
                f"no {S.D_SAE_METADATA_KEY.decode()!r} in the Parquet schema metadata; pass --d-sae",
                path=str(p),
            )
        try:
            d_sae = int(stored)
        except ValueError:
            raise InputError(
                f"schema metadata {S.D_SAE_METADATA_KEY.decode()!r} is not an integer: {stored!r}",
                path=str(p),
            ) from None
    elif stored is not None and stored.strip() != str(d_sae):
        raise InputError(f"--d-sae {d_sae} contradicts the file's metadata d_sae={stored}", path=str(p))
    if d_sae <= 0:
        raise InputError(f"d_sae must be positive, got {d_sae}", path=str(p))
    n_rows = pf.metadata.num_rows
    if n_rows == 0:
        raise InputError("empty file: no rows", path=str(p))
    columns = list(S.REQUIRED_ROW_COLUMNS) + [c for c in S.OPTIONAL_ROW_COLUMNS if c in schema.names]
    return RowsFile(p, pf, d_sae, n_rows, S.MODEL in schema.names, columns, meta)


def _first(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def _cast(column: pa.Array | pa.ChunkedArray, name: str, rows: RowsFile, first_row: int) -> pa.Array:
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


def _validate(table: pa.Table, rows: RowsFile, first_row: int) -> RowBatch:
    path = str(rows.path)
    names = [c for c in rows.columns if c != S.MODEL]
    cols = {name: _cast(table.column(name), name, rows, first_row) for name in names}
    for name in names:
        if name != S.SCORE:
            _check_no_nulls(cols[name], name, rows, first_row)

    empty = pc.equal(pc.utf8_length(cols[S.BENCHMARK]), 0).to_numpy(zero_copy_only=False)
    if empty.any():
        raise InputError("is empty", path=path, row=first_row + _first(empty), field=S.BENCHMARK)

    scores = cols[S.SCORE].to_numpy(zero_copy_only=False).astype(np.float64)  # nulls become NaN
    is_null = np.asarray(cols[S.SCORE].is_null().to_numpy(zero_copy_only=False))
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

    def row_of(elem_mask: npt.NDArray[np.bool_]) -> int:
        return first_row + int(np.searchsorted(id_offsets, _first(elem_mask), side="right") - 1)

    if ids.size:
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


def iter_row_batches(
    rows: RowsFile, *, model: str | None = None, batch_rows: int = DEFAULT_BATCH_ROWS
) -> Iterator[RowBatch]:
    """Validated batches of the file, optionally only the rows of one evaluated `model`.

    Without `model`, a file holding several distinct models is an error: CG scores one model at a time.
    Duplicate (benchmark, row_id) keys are detected after the last batch (see `DuplicateKeyCheck`).
    """
    if model is not None and not rows.has_model_column:
        raise InputError(f"--model {model!r} given but the file has no {S.MODEL!r} column", path=str(rows.path))
    seen_models: set[str] = set()
    keys = DuplicateKeyCheck(rows)
    first_row = 0
    kept = 0
    for record_batch in _iter_record_batches(rows, batch_rows):
        table = pa.Table.from_batches([record_batch])
        n = table.num_rows
        # Validate whole batches so row numbers in errors are always file rows.
        batch = _validate(table, rows, first_row)
        file_rows = np.arange(first_row, first_row + n)
        first_row += n
        if rows.has_model_column:
            model_col = table.column(S.MODEL)
            if model is None:
                seen_models.update(m for m in pc.unique(model_col).to_pylist() if m is not None)
                if len(seen_models) > 1:
                    raise InputError(
                        f"holds rows of several models {sorted(seen_models)}; choose one with --model",
                        path=str(rows.path),
                        field=S.MODEL,
                    )
            else:
                mask = pc.fill_null(pc.equal(model_col, model), False).to_numpy(zero_copy_only=False)
                if not mask.all():
                    batch, file_rows = _select(batch, mask), file_rows[mask]
        if len(batch) == 0:
            continue
        keys.add(batch.row_ids, batch.benchmark_codes, batch.benchmark_names, file_rows)
        kept += len(batch)
        yield batch
    if model is not None and kept == 0:
        raise InputError(f"no rows of model {model!r}", path=str(rows.path), field=S.MODEL)
    keys.check()


def _iter_record_batches(rows: RowsFile, batch_rows: int) -> Iterator[pa.RecordBatch]:
    for group in range(rows.parquet.num_row_groups):  # one row group at a time bounds the reader's memory
        yield from rows.parquet.iter_batches(batch_size=batch_rows, columns=rows.columns, row_groups=[group])


def _select(batch: RowBatch, mask: npt.NDArray[np.bool_]) -> RowBatch:
    lengths = np.diff(batch.offsets)
    elem_mask = np.repeat(mask, lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths[mask])]).astype(np.int64)
    return RowBatch(
        first_row=batch.first_row,
        row_ids=batch.row_ids.filter(pa.array(mask)),
        benchmark_codes=batch.benchmark_codes[mask],
        benchmark_names=batch.benchmark_names,
        scores=batch.scores[mask],
        n_tokens=batch.n_tokens[mask],
        offsets=offsets,
        concept_ids=batch.concept_ids[elem_mask],
        concept_acts=batch.concept_acts[elem_mask],
    )


class DuplicateKeyCheck:
    """Collects (benchmark, row_id) keys across batches; `check` raises on the first repeated key.

    Keys are kept as Arrow arrays (a few bytes per row), never as Python objects.
    """

    def __init__(self, rows: RowsFile) -> None:
        self.rows = rows
        self._tables: list[pa.Table] = []

    def add(self, row_ids: pa.Array, codes: np.ndarray, names: list[str], file_rows: np.ndarray) -> None:
        benchmarks = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(names, pa.string()))
        self._tables.append(
            pa.table({"b": benchmarks.cast(pa.string()), "r": row_ids, "i": pa.array(file_rows, pa.int64())})
        )

    def check(self) -> None:
        if not self._tables:
            return
        table = pa.concat_tables(self._tables)
        counts = table.group_by(["b", "r"]).aggregate([("i", "count"), ("i", "min"), ("i", "max")])
        dups = counts.filter(pc.greater(counts.column("i_count"), 1))
        if dups.num_rows:
            first = dups.sort_by("i_max").slice(0, 1).to_pylist()[0]
            raise InputError(
                f"duplicate (benchmark, row_id) = ({first['b']!r}, {first['r']!r}), first seen at row {first['i_min']}",
                path=str(self.rows.path),
                row=int(first["i_max"]),
                field=S.ROW_ID,
            )


def accumulate_rows(rows: RowsFile, *, model: str | None = None, batch_rows: int = DEFAULT_BATCH_ROWS) -> CGAccumulator:
    """Stream the whole file into per-benchmark sums (memory O(benchmarks × d_sae + rows' keys))."""
    acc = CGAccumulator(rows.d_sae)
    started = last_report = time.perf_counter()
    for batch in iter_row_batches(rows, model=model, batch_rows=batch_rows):
        if (now := time.perf_counter()) - last_report > PROGRESS_EVERY_S:
            done = batch.first_row
            log.info("aggregated %s / %s rows (%.0f rows/s)", f"{done:,}", f"{rows.n_rows:,}", done / (now - started))
            last_report = now
        acc.add_batch(
            batch.benchmark_codes,
            batch.benchmark_names,
            batch.scores,
            batch.offsets,
            batch.concept_ids,
            batch.concept_acts,
        )
    return acc


def load_row_table(rows: RowsFile, *, model: str | None = None) -> RowTable:
    """The whole (validated) file in memory as one CSR table, for analyses that drop rows at will."""
    names: dict[str, int] = {}
    codes, scores, offsets, ids, acts = [], [], [], [], []
    n_elems = 0
    for batch in iter_row_batches(rows, model=model):
        remap = np.array([names.setdefault(n, len(names)) for n in batch.benchmark_names], dtype=np.int32)
        codes.append(remap[batch.benchmark_codes])
        scores.append(batch.scores)
        offsets.append(batch.offsets[1:] + n_elems)
        n_elems += int(batch.offsets[-1])
        ids.append(batch.concept_ids)
        acts.append(batch.concept_acts)
    return RowTable(
        d_sae=rows.d_sae,
        benchmark_names=list(names),
        benchmark_codes=np.concatenate(codes),
        scores=np.concatenate(scores),
        offsets=np.concatenate([np.zeros(1, dtype=np.int64), *offsets]),
        concept_ids=np.concatenate(ids),
        concept_acts=np.concatenate(acts),
    )
