"""Reading local record files (JSONL, CSV, Parquet) with errors that name the file, line/row and field."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

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
    """(1-based line, object) for each non-blank line of a JSONL file (gzip too, by its `.gz` suffix).

    The reader shared by extract inputs, labels and the SAE corpus: errors name the file and the line as an
    editor shows it."""
    try:
        with open_text(path) as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"line {line_no}: invalid JSON ({exc.msg})", path=str(path)) from None
                if not isinstance(record, dict):
                    raise InputError(f"line {line_no}: expected a JSON object", path=str(path))
                yield line_no, record
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", path=str(path)) from None


def existing_file(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError("file not found" if not p.exists() else "not a regular file", path=str(p))
    return p


def iter_records(path: str | Path, fmt: FileFormat = "auto") -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(row index, record)``; the index is 0-based over data rows (JSONL: non-blank lines)."""
    p = existing_file(path)
    kind = detect_format(p, fmt)
    if kind == "parquet":
        yield from _parquet(p)
    else:
        text = _read_utf8(p)
        yield from (_jsonl(p, text) if kind == "jsonl" else _csv(p, text))


def _read_utf8(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"not valid UTF-8 on line {line} (byte {exc.start}); re-encode the file as UTF-8",
            path=str(path),
            row=line - 1,
        ) from None


def _jsonl(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    index = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON on line {lineno}: {exc.msg}", path=str(path), row=index) from None
        if not isinstance(record, dict):
            raise InputError(
                f"line {lineno} is a JSON {type(record).__name__}, expected an object", path=str(path), row=index
            )
        yield index, record
        index += 1


def _csv(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        for index, record in enumerate(reader):
            if None in record:  # more cells than header columns
                raise InputError(f"line {reader.line_num} has more cells than the header", path=str(path), row=index)
            yield index, dict(record)
    except csv.Error as exc:
        raise InputError(f"malformed CSV near line {reader.line_num}: {exc}", path=str(path)) from None


def _parquet(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"cannot read as Parquet: {exc}", path=str(path)) from None
    yield from enumerate(table.to_pylist())
