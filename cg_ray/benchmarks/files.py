"""Reading local record files (JSONL, CSV, Parquet) with errors that name the file, line/row and field."""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

from cg_ray.errors import InputError

FileFormat = Literal["auto", "jsonl", "csv", "parquet"]
_SUFFIXES: dict[str, Literal["jsonl", "csv", "parquet"]] = {
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
        return _SUFFIXES[path.suffix.lower()]
    except KeyError:
        raise InputError(
            f"cannot tell the format from the suffix {path.suffix!r}; set format: jsonl, csv or parquet",
            path=str(path),
        ) from None


def open_text(path: Path) -> IO[str]:
    """A UTF-8 text file, decompressed on the fly when its name ends in `.gz`."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return path.open(encoding="utf-8")


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line, object) for each non-blank line of a JSONL file (gzip too, by its `.gz` suffix),
    streamed: the reader of extract inputs, labels and the SAE corpus."""
    try:
        with open_text(path) as fh:
            yield from _json_lines(fh, path)
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", path=str(path)) from None


def _json_lines(lines: Iterable[str], path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg})", path=str(path), line=line_no) from None
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, not a {type(record).__name__}", path=str(path), line=line_no)
        yield line_no, record


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


def iter_records(path: str | Path, fmt: FileFormat = "auto") -> Iterator[Record]:
    p = existing_file(path)
    kind = detect_format(p, fmt)
    if kind == "parquet":
        yield from _parquet(p)
    else:
        text = _read_utf8(p)
        yield from (_jsonl(p, text) if kind == "jsonl" else _csv(p, text))


@contextlib.contextmanager
def located(record: Record) -> Iterator[None]:
    """Errors about `record` (raised with its 0-based `row`) name its line instead, as an editor shows it."""
    try:
        yield
    except InputError as exc:
        if record.line is None or exc.line is not None or exc.row != record.row:
            raise
        raise InputError(exc.reason, path=exc.path, field=exc.field, line=record.line) from None


def _read_utf8(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"not valid UTF-8 (byte {exc.start}); re-encode the file as UTF-8", path=str(path), line=line
        ) from None


def _jsonl(path: Path, text: str) -> Iterator[Record]:
    for index, (line, record) in enumerate(_json_lines(text.splitlines(), path)):
        yield Record(index, line, record)


def _csv(path: Path, text: str) -> Iterator[Record]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        for index, record in enumerate(reader):
            if None in record:  # more cells than header columns
                raise InputError("more cells than the header", path=str(path), line=reader.line_num)
            yield Record(index, reader.line_num, dict(record))
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", path=str(path), line=reader.line_num) from None


def _parquet(path: Path) -> Iterator[Record]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"cannot read as Parquet: {exc}", path=str(path)) from None
    for index, record in enumerate(table.to_pylist()):
        yield Record(index, None, record)
