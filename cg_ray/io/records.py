"""Reading local record files (JSONL, CSV, Parquet) with errors that name the file, line/row and field."""

from __future__ import annotations

import codecs
import contextlib
import csv
import gzip
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple

from cg_ray.errors import InputError, LimitExceeded

FileFormat = Literal["auto", "jsonl", "csv", "parquet"]
FORMAT_BY_SUFFIX: dict[str, Literal["jsonl", "csv", "parquet"]] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def detect_format(path: Path, fmt: FileFormat = "auto") -> Literal["jsonl", "csv", "parquet"]:
    if fmt != "auto":
        return fmt
    try:
        return FORMAT_BY_SUFFIX[path.suffix.lower()]
    except KeyError:
        raise InputError(
            f"cannot tell the format from the suffix {path.suffix!r}; set format: jsonl, csv or parquet",
            path=str(path),
        ) from None


class JsonLine(NamedTuple):
    """One non-blank line of JSONL: its 1-based line, the decoded value (any JSON type), or why it is not
    JSON (`value` is None then)."""

    line: int
    value: Any
    error: str | None


def iter_json_lines(source: Path | bytes, *, name: str | None = None) -> Iterator[JsonLine]:
    """Every non-blank line of a JSONL file (gzip too, by its `.gz` suffix) or of uploaded bytes, decoded
    but not judged, streamed. Text that is not UTF-8 raises InputError naming the line; a line that is not
    JSON comes back with its error, for readers that skip or report bad records in their own terms
    (battles, uploads). Everyone else reads through the strict `iter_jsonl`."""
    where = _name(source, name)
    with _binary(source) as lines:
        for line_no, raw in enumerate(lines, start=1):
            try:
                text = (raw.removeprefix(codecs.BOM_UTF8) if line_no == 1 else raw).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"not valid UTF-8 text (byte {exc.start}); re-encode the file as UTF-8", path=where, line=line_no
                ) from None
            if not text.strip():
                continue
            value, error = decode_json(text)
            yield JsonLine(line_no, value, error)


def decode_json(text: str) -> tuple[object, str | None]:
    """(value, None), or (None, why) for text that is not JSON. Never raises: besides malformed JSON this
    catches integers longer than Python converts (ValueError), nesting deeper than the parser recurses
    (RecursionError) and anything else the decoder may throw on hostile input."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        return None, f"invalid JSON: {exc}"


def iter_jsonl(source: Path | bytes, *, name: str | None = None) -> Iterator[tuple[int, dict[str, object]]]:
    """(1-based line, object) for each non-blank line (see `iter_json_lines`); anything but a JSON object
    raises InputError naming the file and line. The reader of extract inputs, labels, the SAE corpus and
    every JSONL source."""
    where = _name(source, name)
    for record in iter_json_lines(source, name=where):
        if record.error is not None:
            raise InputError(record.error, path=where, line=record.line)
        if not isinstance(record.value, dict):
            raise InputError(
                f"expected a JSON object, not a {type(record.value).__name__}", path=where, line=record.line
            )
        yield record.line, record.value


def _name(source: Path | bytes, name: str | None) -> str | None:
    return name if name is not None else str(source) if isinstance(source, Path) else None


@contextlib.contextmanager
def _binary(source: Path | bytes) -> Iterator[Iterable[bytes]]:
    """Lines split on `\\n` only (as editors and `wc -l` count them)."""
    if isinstance(source, bytes):
        yield io.BytesIO(source)
        return
    with gzip.open(source, "rb") if source.suffix == ".gz" else source.open("rb") as fh:
        yield fh


def existing_file(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError("file not found" if not p.exists() else "not a regular file", path=str(p))
    return p


class Record(NamedTuple):
    """One record of a file: its 0-based row among the data rows (ids default to it), the 1-based line
    where it starts (None in Parquet, which has no lines), and its fields."""

    row: int
    line: int | None
    data: dict[str, Any]


class ReadLimits(NamedTuple):
    """Bounds checked before the work they bound (None: unbounded). `columns`: the only top-level columns a
    Parquet reader decodes (the others are never converted); `max_rows`: Parquet's metadata row count;
    `max_decoded_bytes`: the uncompressed size of the decoded Parquet columns (a compression bomb stops
    here); `max_field_chars`: the longest CSV cell."""

    columns: frozenset[str] | None = None
    max_rows: int | None = None
    max_decoded_bytes: int | None = None
    max_field_chars: int | None = None


NO_LIMITS = ReadLimits()


def iter_records(
    source: str | Path | bytes, fmt: FileFormat = "auto", *, name: str | None = None, limits: ReadLimits = NO_LIMITS
) -> Iterator[Record]:
    """The records of a local file, or of uploaded bytes (`name`: the file name, for the format and errors).
    Whatever the bytes, the only error raised is InputError (with the line, row or field where known)."""
    data: Path | bytes
    if isinstance(source, bytes):
        where, data = name or "<upload>", source
        kind = detect_format(Path(where), fmt)
    else:
        path = existing_file(source)
        where, data, kind = str(path), path, detect_format(path, fmt)
    if kind == "parquet":
        yield from _parquet(data, where, limits)
    elif kind == "jsonl":
        for index, (line, record) in enumerate(iter_jsonl(data, name=where)):
            yield Record(index, line, record)
    else:
        yield from _csv(where, _read_utf8(_csv_bytes(data, where), where), limits.max_field_chars)


@contextlib.contextmanager
def located(record: Record) -> Iterator[None]:
    """Errors about `record` (raised with its 0-based `row`) name its line instead, as an editor shows it."""
    try:
        yield
    except InputError as exc:
        if record.line is None or exc.line is not None or exc.row != record.row:
            raise
        raise InputError(exc.reason, path=exc.path, field=exc.field, line=record.line) from None


def _csv_bytes(data: Path | bytes, where: str) -> bytes:
    if isinstance(data, bytes):
        return data
    if data.suffix != ".gz":
        return data.read_bytes()
    try:
        return gzip.decompress(data.read_bytes())
    except (OSError, EOFError) as exc:  # not gzip, or truncated
        raise InputError(f"cannot decompress ({exc})", path=where) from None


def _read_utf8(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"not valid UTF-8 text (byte {exc.start}); re-encode the file as UTF-8", path=where, line=line
        ) from None


def _csv(where: str, text: str, max_field_chars: int | None) -> Iterator[Record]:
    # The csv module's own cap (131,072 by default) is process-wide; it is raised to ours only, never lowered,
    # and ours is checked here cell by cell, naming the line and column.
    limit = max_field_chars or _CSV_DEFAULT_FIELD_LIMIT
    if csv.field_size_limit() < limit + 1:
        csv.field_size_limit(limit + 1)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        _ = reader.fieldnames  # the header is read here, so the first record starts on the next line
        end = reader.line_num
        for index, record in enumerate(reader):
            # A record's quoted cells may span lines (an exported list, a long answer): name where it starts.
            line, end = end + 1, reader.line_num
            if None in record:  # more cells than header columns
                raise InputError("more cells than the header", path=where, line=line)
            for column, cell in record.items():
                if cell is not None and len(cell) > limit:
                    raise LimitExceeded(
                        f"cell is {len(cell):,} characters, over the {limit:,} limit",
                        path=where,
                        line=line,
                        field=column,
                    )
            yield Record(index, line, dict(record))
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", path=where, line=reader.line_num) from None


_CSV_DEFAULT_FIELD_LIMIT = 131_072


def _parquet(source: Path | bytes, where: str, limits: ReadLimits) -> Iterator[Record]:
    """Streamed in batches: a large file is never held as Python objects all at once. The metadata row count
    and the decoded size of the columns read are checked before anything is decoded; only `limits.columns`
    are converted to Python objects (an unreadable unmapped column does not matter)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(io.BytesIO(source) if isinstance(source, bytes) else source)
        columns = _parquet_columns(parquet, where, limits)
        batches = parquet.iter_batches(batch_size=4096, columns=columns)
        index, decoded = 0, 0
        for batch in batches:
            decoded += batch.nbytes  # the metadata may lie: the decoded size is counted as well
            if limits.max_decoded_bytes is not None and decoded > limits.max_decoded_bytes:
                raise LimitExceeded(f"decodes to over {limits.max_decoded_bytes:,} bytes", path=where)
            for record in batch.to_pylist():
                yield Record(index, None, record)
                index += 1
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError, OverflowError, TypeError, KeyError, MemoryError) as exc:
        # Arrow's own errors, and Python's when a value has no Python equivalent (a timestamp out of range)
        raise InputError(f"cannot read as Parquet: {type(exc).__name__}: {exc}", path=where) from None


def _parquet_columns(parquet: Any, where: str, limits: ReadLimits) -> list[str] | None:
    """The top-level columns to decode, once the file's metadata says it is within the limits."""
    meta = parquet.metadata
    if limits.max_rows is not None and meta.num_rows > limits.max_rows:
        raise LimitExceeded(f"{meta.num_rows:,} rows, over the {limits.max_rows:,}-row limit", path=where)
    names = parquet.schema_arrow.names
    wanted = None if limits.columns is None else [n for n in names if n in limits.columns]
    if limits.max_decoded_bytes is not None:
        keep = set(names if wanted is None else wanted)
        size = 0
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                column = group.column(c)
                if column.path_in_schema.split(".", 1)[0] in keep:
                    size += max(column.total_uncompressed_size, 0)
        if size > limits.max_decoded_bytes:
            raise LimitExceeded(
                f"decodes to {size:,} bytes, over the {limits.max_decoded_bytes:,}-byte limit", path=where
            )
    return wanted
