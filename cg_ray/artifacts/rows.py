"""Read and validate rows.parquet in streaming batches.

Every check is vectorized per batch and reports the first offending row (0-based, counted over the whole
file) and field. Validation completes before anything is written, so bad input never leaves output.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.row_batch import RowBatch, RowsFile, validate_batch
from cg_ray.errors import InputError
from cg_ray.metrics.accumulator import CGAccumulator
from cg_ray.metrics.robustness import RowTable

DEFAULT_BATCH_ROWS = 16_384  # measured fastest on 1M × 64 nnz (fits in cache, less RSS)
READ_BUFFER_BYTES = 8 << 20
PROGRESS_EVERY_S = 5.0

log = logging.getLogger(__name__)


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
        batch = validate_batch(table, rows, first_row)
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

    Keys are kept as a 64-bit hash and the file row, 16 bytes a row (the key strings grouped at the end took
    ~330 MB at 1M rows, most of the driver's growth with the row count). A repeated hash is confirmed on the
    file's own keys before it is reported, so a hash collision never fails a run.
    """

    _MIX: Final = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant: spreads the benchmark's hash

    def __init__(self, rows: RowsFile) -> None:
        self.rows = rows
        self._hashes: list[npt.NDArray[np.uint64]] = []
        self._file_rows: list[npt.NDArray[np.int64]] = []

    def add(self, row_ids: pa.Array, codes: np.ndarray, names: list[str], file_rows: np.ndarray) -> None:
        bench = self.hash_strings(np.asarray(names, dtype=object))
        rows = self.hash_strings(row_ids.to_numpy(zero_copy_only=False))
        self._hashes.append(rows ^ (bench[codes] * self._MIX))
        self._file_rows.append(np.asarray(file_rows, dtype=np.int64))

    @staticmethod
    def hash_strings(values: np.ndarray) -> npt.NDArray[np.uint64]:
        """pandas' vectorised SipHash of an object array of strings: no per-row Python hashing. Not
        `categorize`d: row ids are nearly all distinct, and factorizing them first made it 5x slower."""
        return pd.util.hash_array(values, categorize=False)

    def check(self) -> None:
        if not self._hashes:
            return
        hashes, file_rows = np.concatenate(self._hashes), np.concatenate(self._file_rows)
        order = np.lexsort((file_rows, hashes))
        repeated = hashes[order][1:] == hashes[order][:-1]
        if not repeated.any():
            return
        suspects = np.unique(np.concatenate([order[1:][repeated], order[:-1][repeated]]))
        groups: dict[tuple[str, str], list[int]] = {}
        for key, row in zip(self._file_keys(file_rows[suspects]), file_rows[suspects].tolist(), strict=True):
            groups.setdefault(key, []).append(row)
        dups = [(max(rows), min(rows), key) for key, rows in groups.items() if len(rows) > 1]
        if dups:
            i_max, i_min, (benchmark, row_id) = min(dups)
            raise InputError(
                f"duplicate (benchmark, row_id) = ({benchmark!r}, {row_id!r}), first seen at row {i_min}",
                path=str(self.rows.path),
                row=i_max,
                field=S.ROW_ID,
            )

    def _file_keys(self, file_rows: npt.NDArray[np.int64]) -> list[tuple[str, str]]:
        """The (benchmark, row_id) of these file rows, read back from the file (only when hashes repeat)."""
        table = self.rows.parquet.read(columns=[S.BENCHMARK, S.ROW_ID]).take(pa.array(file_rows))
        return list(zip(table.column(S.BENCHMARK).to_pylist(), table.column(S.ROW_ID).to_pylist(), strict=True))


def accumulate_rows(
    rows: RowsFile,
    *,
    model: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    observe: Callable[[RowBatch], None] | None = None,
) -> CGAccumulator:
    """Stream the whole file into per-benchmark sums (memory O(benchmarks × d_sae + rows' keys)); `observe`
    sees every batch too (another streaming analysis sharing this one read of the activations)."""
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
        if observe is not None:
            observe(batch)
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
