"""The rows as metadata strata: each row's benchmark and flat metadata values as integer codes, its score,
and the cell means that say what its metadata alone predicts.

Only the light columns of rows.parquet are read (row_id, benchmark, score, model, metadata), one row group
at a time, so a 1M-row file costs a few int32 arrays per analysed field, never its activations or texts.
`benchmark` is a field like any other. A field is analysed when it is flat and has 2..`max_values`
distinct values; the others are listed in `skipped` with the reason (nested, too many values, one value).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cg_ray import schemas as S
from cg_ray.arrays import FloatArray, IntArray
from cg_ray.artifacts.row_batch import RowsFile, cast_column
from cg_ray.errors import InputError
from cg_ray.profile.metadata import MAX_VALUES, MetadataCoder

AUTO_FIELDS = 2  # `--adjust-for auto`: metadata fields taken from the best slices, besides `benchmark`
MIN_CELL_ROWS = 5  # a cell with fewer scored rows borrows its parent's mean (drop its last field)
MISSING = "(missing)"
GROUP_FIELD = "group"  # metadata field naming the rows that belong together (profile.groups)

Codes = npt.NDArray[np.int32]


@dataclass
class RowFrame:
    """One entry per row of the evaluated model, in file order."""

    file_rows: IntArray  # index of each row in rows.parquet
    row_ids: pa.Array  # string; an Arrow array (a few bytes a row), not a million Python str
    scores: FloatArray  # NaN = unscored
    codes: dict[str, Codes]  # analysed field → code per row (-1: the row lacks it)
    values: dict[str, list[str]]  # analysed field → its values in code order
    skipped: dict[str, str] = field(default_factory=dict)  # field → why it is not analysed
    # cell_keys' results by field tuple: the R splits ask for the same few cells many times
    cells: dict[tuple[str, ...], IntArray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_rows(self) -> int:
        return int(self.scores.size)

    @property
    def scored(self) -> npt.NDArray[np.bool_]:
        return ~np.isnan(self.scores)

    def row_id(self, position: int) -> str:
        return str(self.row_ids[position].as_py())

    def value(self, name: str, code: int) -> str:
        return MISSING if code < 0 else self.values[name][code]

    def subset(self, positions: IntArray) -> RowFrame:
        return RowFrame(
            self.file_rows[positions],
            self.row_ids.take(pa.array(positions)),
            self.scores[positions],
            {k: v[positions] for k, v in self.codes.items()},
            self.values,
            self.skipped,
        )


def read_frame(rows: RowsFile, model: str | None = None, max_values: int = MAX_VALUES) -> RowFrame:
    """Stream the light columns of `rows` (only `model`'s rows when given) into a `RowFrame`."""
    names = rows.parquet.schema_arrow.names
    columns = [c for c in (S.ROW_ID, S.BENCHMARK, S.SCORE, S.MODEL, S.METADATA) if c in names]
    coder = MetadataCoder(str(rows.path), max_values=max_values)
    bench_index: dict[str, int] = {}
    file_rows: list[IntArray] = []
    ids: list[pa.Array] = []
    scores: list[FloatArray] = []
    bench: list[Codes] = []
    meta_parts: list[dict[str, Codes]] = []
    first = 0
    for group in range(rows.parquet.num_row_groups):
        for rb in rows.parquet.iter_batches(columns=columns, row_groups=[group]):
            n = rb.num_rows
            keep = np.ones(n, dtype=bool)
            if model is not None and S.MODEL in columns:
                keep = pc.fill_null(pc.equal(rb.column(S.MODEL), model), False).to_numpy(zero_copy_only=False)
            sel = np.flatnonzero(keep)
            if sel.size:
                take = pa.array(sel)
                file_rows.append(first + sel)
                ids.append(rb.column(S.ROW_ID).take(take).cast(pa.string()))
                score = cast_column(rb.column(S.SCORE).take(take), S.SCORE, rows, first)
                scores.append(pc.fill_null(score, float("nan")).to_numpy(zero_copy_only=False))
                names_ = rb.column(S.BENCHMARK).take(take).to_pylist()
                bench.append(np.array([bench_index.setdefault(str(b), len(bench_index)) for b in names_], np.int32))
                if S.METADATA in columns:
                    raw = rb.column(S.METADATA).take(take).to_pylist()
                    meta_parts.append(coder.encode(raw, first + int(sel[0])))
            first += n
    if not scores:
        raise InputError(f"no rows{f' of model {model!r}' if model else ''}", path=str(rows.path))
    n_total = sum(p.size for p in scores)
    codes: dict[str, Codes] = {S.BENCHMARK: np.concatenate(bench)}
    values: dict[str, list[str]] = {S.BENCHMARK: list(bench_index)}
    skipped = dict(coder.skipped())
    if GROUP_FIELD in skipped:  # however many values: it is never sliced or adjusted for
        skipped[GROUP_FIELD] = "the rows' groups for cross-fitting"
    for name, vals in coder.analysed().items():
        if name == S.BENCHMARK:
            skipped["metadata." + name] = "shadows the benchmark column"
            continue
        if name == GROUP_FIELD:  # which rows belong together (profile.groups), not a property of a row
            skipped[name] = "the rows' groups for cross-fitting"
            continue
        # A field first seen in a later batch is absent (-1) in the earlier ones.
        parts = [p.get(name, np.full(s.size, -1, np.int32)) for p, s in zip(meta_parts, scores, strict=True)]
        codes[name], values[name] = np.concatenate(parts), vals
    for name in list(codes):
        present = np.unique(codes[name][codes[name] >= 0])
        if present.size < 2:
            skipped[name] = "a single value" if present.size == 1 else "no values"
            del codes[name], values[name]
    assert all(c.size == n_total for c in codes.values())
    row_ids = pa.concat_arrays(ids)
    return RowFrame(np.concatenate(file_rows), row_ids, np.concatenate(scores), codes, values, skipped)


def cell_keys(frame: RowFrame, fields: Sequence[str]) -> IntArray:
    """One integer per row naming its cell (the tuple of its values of `fields`; missing is a value), numbered
    in the tuples' sorted order; computed once per field tuple and kept on the frame."""
    key = tuple(fields)
    if key not in frame.cells:
        frame.cells[key] = _cell_keys(frame, key)
    return frame.cells[key]


def _cell_keys(frame: RowFrame, fields: tuple[str, ...]) -> IntArray:
    if not fields:
        return np.zeros(frame.n_rows, dtype=np.int64)
    # One mixed-radix integer a row (the first field most significant, so the numbering is the tuples' sorted
    # order), then a 1-D unique: np.unique(axis=0) over the stacked codes is ~20× slower on a million rows.
    radix = [int(frame.codes[f].max(initial=-1)) + 2 for f in fields]  # codes run from -1 (missing)
    if float(np.prod(np.asarray(radix, dtype=np.float64))) < 2.0**62:
        packed = np.zeros(frame.n_rows, dtype=np.int64)
        for f, r in zip(fields, radix, strict=True):
            packed = packed * r + (frame.codes[f].astype(np.int64) + 1)
        _, inverse = np.unique(packed, return_inverse=True)
    else:  # too many combinations for one int64: the stacked codes
        stacked = np.stack([frame.codes[f].astype(np.int64) for f in fields], axis=1)
        _, inverse = np.unique(stacked, axis=0, return_inverse=True)
    keys: IntArray = inverse.reshape(-1).astype(np.int64)
    return keys


def expected_scores(
    frame: RowFrame,
    fields: Sequence[str],
    min_cell_rows: int = MIN_CELL_ROWS,
    fit: npt.NDArray[np.bool_] | None = None,
) -> FloatArray:
    """Each row's cell mean over scored rows; a cell with < `min_cell_rows` scored rows takes its parent's
    (the same fields less the last), down to the suite mean. NaN only when no row is scored. With `fit`,
    the means come from the fit rows only and are applied to every row (held-out validation)."""
    scored = frame.scored if fit is None else frame.scored & fit
    y = np.where(scored, frame.scores, 0.0)
    expected = np.full(frame.n_rows, np.nan)
    for depth in range(len(fields), -1, -1):
        keys = cell_keys(frame, fields[:depth])
        n = np.bincount(keys, weights=scored.astype(np.float64))
        total = np.bincount(keys, weights=y)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(n > 0, total / np.maximum(n, 1), np.nan)
        floor = min_cell_rows if depth else 1
        todo = np.isnan(expected) & (n[keys] >= floor)
        expected[todo] = mean[keys][todo]
    return expected


def parse_adjust_for(spec: str, frame: RowFrame, best_fields: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(fields to adjust for, notes). `spec`: "auto", "none", "benchmark" or "FIELD[,FIELD…]".

    auto = `benchmark` (when the suite has several) plus the fields of the best slices, at most 2 of them.
    A named field that the rows lack is an error naming it; one that is not analysed (a single value,
    nested, too many values) is skipped with a note.
    """
    spec = spec.strip()
    notes: list[str] = []
    if spec == "none":
        return [], notes
    if spec == "auto":
        extra = [name for name in dict.fromkeys(best_fields) if name != S.BENCHMARK][:AUTO_FIELDS]
        return ([S.BENCHMARK] if S.BENCHMARK in frame.codes else []) + extra, notes
    fields = []
    for raw in spec.split(","):
        name = raw.strip()
        if not name:
            continue
        if name in frame.codes:
            if name not in fields:
                fields.append(name)
        elif name in frame.skipped:
            notes.append(f"--adjust-for {name}: skipped ({frame.skipped[name]})")
        else:
            known = sorted(set(frame.codes) | set(frame.skipped))
            raise InputError(f"--adjust-for names {name!r}, which the rows do not have (fields: {known})", field=name)
    return fields, notes
