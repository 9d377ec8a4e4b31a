"""Parse and validate an uploaded benchmark (JSONL / CSV / Parquet bytes, or JSON rows) into a table.

Nothing is stored unless the whole upload is valid. Errors carry the HTTP status, the line (1-based, as
editors count) and the field. Parquet is read with pyarrow (no pickle anywhere); paths are never taken
from the client.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from cg_ray.errors import InputError
from cg_ray.serve.settings import Limits

CHARS_PER_TOKEN_BOUND = 8  # no tokenizer at upload time: reject text that cannot fit max_tokens_per_row

UPLOAD_SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("prompt", pa.string()),
        pa.field("response", pa.string()),
        pa.field("reference", pa.string()),
        pa.field("score", pa.float64()),
    ]
)

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}
CONTENT_TYPES = {
    "jsonl": {
        "application/jsonl",
        "application/x-ndjson",
        "application/json",
        "text/plain",
        "application/octet-stream",
    },
    "csv": {"text/csv", "application/csv", "text/plain", "application/vnd.ms-excel", "application/octet-stream"},
    "parquet": {"application/vnd.apache.parquet", "application/x-parquet", "application/octet-stream"},
}


# What went wrong with an upload; the API edge (cg_ray.serve.errors) decides the HTTP status of each.
MALFORMED = "malformed"  # not readable as the format it claims
TOO_LARGE = "too_large"  # over a size limit
UNSUPPORTED = "unsupported"  # a file type or content type we do not read
INVALID = "invalid"  # readable, but a value is wrong


class UploadError(InputError):
    """A bad upload, located by 1-based line (as an editor shows it) and field."""

    def __init__(self, kind: str, message: str, *, line: int | None = None, field: str | None = None) -> None:
        self.kind, self.line, self.field = kind, line, field
        self.path, self.row, self.reason = None, None, message
        where = ", ".join(p for p in (f"line {line}" if line else "", f"field {field!r}" if field else "") if p)
        Exception.__init__(self, f"{where}: {message}" if where else message)


class FieldMapping(BaseModel):
    """Which source field holds each part of a row; None: not present."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = "id"
    benchmark: str | None = "benchmark"
    prompt: str | None = "prompt"
    response: str | None = "response"
    reference: str | None = "reference"
    score: str | None = "score"


@dataclass(frozen=True)
class ParsedUpload:
    table: pa.Table
    benchmarks: list[str]
    detected_fields: list[str]
    has_scores: bool


def detect_format(filename: str, content_type: str | None) -> str:
    suffix = "." + filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    fmt = FORMATS.get(suffix)
    if fmt is None:
        raise UploadError(UNSUPPORTED, f"unsupported file type {suffix or '(none)'!r}: use .jsonl, .csv or .parquet")
    base_type = (content_type or "application/octet-stream").split(";")[0].strip().lower()
    if base_type not in CONTENT_TYPES[fmt]:
        raise UploadError(UNSUPPORTED, f"content type {base_type!r} does not match a {fmt} file")
    return fmt


def _jsonl_records(data: bytes, limits: Limits) -> Iterator[tuple[int, Any]]:
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        if len(raw) > limits.max_line_bytes:
            raise UploadError(
                TOO_LARGE, f"line is {len(raw):,} bytes, over the {limits.max_line_bytes:,} limit", line=line_no
            )
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UploadError(MALFORMED, f"not UTF-8 text (byte {exc.start})", line=line_no) from None
        try:
            yield line_no, json.loads(text)
        except json.JSONDecodeError as exc:
            raise UploadError(MALFORMED, f"invalid JSON ({exc.msg} at column {exc.colno})", line=line_no) from None


def _csv_records(data: bytes, limits: Limits) -> Iterator[tuple[int, Any]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UploadError(MALFORMED, f"not UTF-8 text (byte {exc.start})", line=line) from None
    for line_no, raw in enumerate(text.split("\n"), start=1):
        if len(raw.encode()) > limits.max_line_bytes:
            raise UploadError(TOO_LARGE, f"line is over the {limits.max_line_bytes:,}-byte limit", line=line_no)
    reader = csv.DictReader(io.StringIO(text))
    for record in reader:
        if None in record:
            raise UploadError(MALFORMED, "more values than header columns", line=reader.line_num)
        yield reader.line_num, record


def _parquet_records(data: bytes, limits: Limits) -> Iterator[tuple[int, Any]]:
    try:
        table = pq.read_table(io.BytesIO(data))
    except (pa.ArrowInvalid, OSError) as exc:
        raise UploadError(MALFORMED, f"not a readable Parquet file ({exc})") from None
    if table.num_rows > limits.max_rows:
        raise UploadError(TOO_LARGE, f"{table.num_rows:,} rows, over the {limits.max_rows:,}-row limit")
    yield from enumerate(table.to_pylist(), start=1)


def _text(value: Any, line: int, field: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise UploadError(INVALID, f"expected text, got {type(value).__name__}", line=line, field=field)


def _score(value: Any, line: int, field: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise UploadError(INVALID, f"score {value!r} is not a number", line=line, field=field) from None
    if math.isnan(score) or not 0.0 <= score <= 1.0:
        raise UploadError(INVALID, f"score {value!r} is outside [0, 1]", line=line, field=field)
    return score


def normalize(
    records: Iterable[tuple[int, Any]], mapping: FieldMapping, default_benchmark: str, limits: Limits
) -> ParsedUpload:
    cols: dict[str, list[Any]] = {name: [] for name in UPLOAD_SCHEMA.names}
    seen_ids: dict[tuple[str, str], int] = {}
    detected: set[str] = set()
    max_chars = limits.max_tokens_per_row * CHARS_PER_TOKEN_BOUND
    for line, record in records:
        if not isinstance(record, Mapping):
            raise UploadError(INVALID, "expected an object (one row per line)", line=line)
        if len(cols["row_id"]) >= limits.max_rows:
            raise UploadError(TOO_LARGE, f"more than {limits.max_rows:,} rows", line=line)
        detected.update(record)

        def get(part: str, rec: Mapping[str, Any] = record) -> Any:
            name = getattr(mapping, part)
            return rec.get(name) if name else None

        prompt = _text(get("prompt"), line, mapping.prompt or "prompt")
        response = _text(get("response"), line, mapping.response or "response")
        if not (prompt or response):
            names = [n for n in (mapping.prompt, mapping.response) if n]
            raise UploadError(
                INVALID, "missing text: the row has neither a prompt nor a response", line=line, field=" / ".join(names)
            )
        for part, text in (("prompt", prompt), ("response", response)):
            if text and len(text) > max_chars:
                raise UploadError(
                    TOO_LARGE,
                    f"text longer than the {limits.max_tokens_per_row:,}-token limit",
                    line=line,
                    field=getattr(mapping, part),
                )
        row_id = _text(get("id"), line, mapping.id or "id") or str(line)
        benchmark = _text(get("benchmark"), line, mapping.benchmark or "benchmark") or default_benchmark
        if (benchmark, row_id) in seen_ids:
            raise UploadError(
                INVALID,
                f"duplicate id {row_id!r} in benchmark {benchmark!r} (first on line {seen_ids[(benchmark, row_id)]})",
                line=line,
                field=mapping.id,
            )
        seen_ids[(benchmark, row_id)] = line
        cols["row_id"].append(row_id)
        cols["benchmark"].append(benchmark)
        cols["prompt"].append(prompt)
        cols["response"].append(response)
        cols["reference"].append(_text(get("reference"), line, mapping.reference or "reference"))
        cols["score"].append(_score(get("score"), line, mapping.score or "score"))
    if not cols["row_id"]:
        raise UploadError(MALFORMED, "empty upload: no rows")
    table = pa.table(cols, schema=UPLOAD_SCHEMA)
    return ParsedUpload(
        table=table,
        benchmarks=sorted(set(cols["benchmark"])),
        detected_fields=sorted(detected),
        has_scores=any(s is not None for s in cols["score"]),
    )


def parse_file(
    data: bytes, filename: str, content_type: str | None, mapping: FieldMapping, default_benchmark: str, limits: Limits
) -> ParsedUpload:
    if len(data) > limits.max_upload_bytes:
        raise UploadError(TOO_LARGE, f"upload is {len(data):,} bytes, over the {limits.max_upload_bytes:,}-byte limit")
    if not data.strip():
        raise UploadError(MALFORMED, "empty upload: no rows")
    fmt = detect_format(filename, content_type)
    records = {"jsonl": _jsonl_records, "csv": _csv_records, "parquet": _parquet_records}[fmt](data, limits)
    return normalize(records, mapping, default_benchmark, limits)


def parse_rows(rows: list[Any], mapping: FieldMapping, default_benchmark: str, limits: Limits) -> ParsedUpload:
    return normalize(enumerate(rows, start=1), mapping, default_benchmark, limits)
