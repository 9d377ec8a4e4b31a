"""Parse and validate an uploaded benchmark (JSONL / CSV / Parquet bytes, or JSON rows) into a table.

Nothing is stored unless the whole upload is valid. Files are read by the one record reader
(`cg_ray.io.records`) and mapped with the one `FieldMapping` (`cg_ray.benchmarks.sources`). Errors
carry their kind (the API edge turns it into an HTTP status), the file, the line (1-based, as editors count;
a Parquet row's 1-based position, named "row") and the field. Parquet is read with pyarrow (no pickle
anywhere); paths are never taken from the client.

The product's own row files upload as they are: rows.parquet (a run's, the extract output's, the service's
download) and JSONL / CSV exports of it carry `row_id` and the metadata object as JSON text; nested metadata
values are stored as JSON and skipped by slices and adjustment with a note, as the CLI's metrics do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from cg_ray.benchmarks.mapping import MISSING, dotted_get
from cg_ray.benchmarks.sources import FieldMapping
from cg_ray.errors import InputError, LimitExceeded
from cg_ray.io.records import FORMAT_BY_SUFFIX, ReadLimits, iter_json_lines, iter_records
from cg_ray.serve import inspect_uploads
from cg_ray.serve.inspect_uploads import InspectOptions
from cg_ray.serve.settings import Limits
from cg_ray.serve.upload_values import (
    INVALID,
    MALFORMED,
    TOO_LARGE,
    UNSUPPORTED,
    UploadError,
    metadata_value,
    score_value,
    short,
    text_value,
)

CHARS_PER_TOKEN_BOUND = 8  # no tokenizer at upload time: reject text that cannot fit max_tokens_per_row

UPLOAD_SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("prompt", pa.string()),
        pa.field("response", pa.string()),
        pa.field("reference", pa.string()),
        pa.field("score", pa.float64()),
        # The row's metadata as a JSON object string, for slices and residual gaps (nested values are kept
        # but not analysed); null: none.
        pa.field("metadata", pa.string()),
    ]
)

# The benchmark files' suffixes; an upload named .json is read as JSONL too (browsers label .jsonl so).
FORMATS = {**FORMAT_BY_SUFFIX, ".json": "jsonl"}
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


# An upload's fields unless the client's mapping names others: besides the mapping's own defaults, an upload
# looks for a per-row benchmark, a response and a score. The parts below are for benchmark sources only.
UPLOAD_DEFAULTS: dict[str, str] = {"benchmark": "benchmark", "response": "response", "score": "score"}
ID_FALLBACK = "row_id"  # how the product's own rows (rows.parquet, extract, arena rows) name the id
SOURCE_ONLY = ("reference_index_base", "choices", "model")


def upload_mapping(given: FieldMapping | None = None) -> FieldMapping:
    """The client's mapping with the upload defaults for every part it leaves unset."""
    values = given.model_dump(exclude_unset=True) if given is not None else {}
    for part in SOURCE_ONLY:
        if values.get(part) is not None:
            raise UploadError(INVALID, "not used by uploads (benchmark sources only)", field=f"mapping.{part}")
    return FieldMapping.model_validate({**UPLOAD_DEFAULTS, **values})


def mapping_record(mapping: FieldMapping) -> dict[str, Any]:
    """What an upload's metadata keeps of its mapping: the parts an upload reads."""
    return {k: v for k, v in mapping.model_dump().items() if k not in SOURCE_ONLY}


@dataclass(frozen=True)
class ParsedUpload:
    table: pa.Table
    benchmarks: list[str]
    detected_fields: list[str]
    has_scores: bool
    mapping: FieldMapping  # as applied: the client's, completed with UPLOAD_DEFAULTS
    notes: list[str] = dataclasses.field(default_factory=list)  # what was kept but will not be analysed, and why
    source: dict[str, Any] | None = None  # how a file that is not rows was read (an inspect_ai log: its options)


def upload_format(filename: str, content_type: str | None) -> str:
    suffix = "." + filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    fmt = FORMATS.get(suffix)
    if fmt is None:
        raise UploadError(
            UNSUPPORTED,
            f"unsupported file type {suffix or '(none)'!r}: use .jsonl, .csv, .parquet or an inspect_ai log (.eval)",
        )
    base_type = (content_type or "application/octet-stream").split(";")[0].strip().lower()
    if base_type not in CONTENT_TYPES[fmt]:
        raise UploadError(UNSUPPORTED, f"content type {base_type!r} does not match a {fmt} file")
    return fmt


def check_line_lengths(data: bytes, limits: Limits) -> None:
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        if len(raw) > limits.max_line_bytes:
            raise UploadError(
                TOO_LARGE, f"line is {len(raw):,} bytes, over the {limits.max_line_bytes:,} limit", line=line_no
            )


def mapped_columns(mapping: FieldMapping) -> frozenset[str]:
    """The top-level fields a mapping reads (`doc.question` reads `doc`): the only Parquet columns decoded."""
    names = [*_prompt_fields(mapping), mapping.id, mapping.benchmark, mapping.response, mapping.reference]
    names += [*_id_fallback(mapping), *(mapping.metadata if mapping.metadata is not None else ["metadata"])]
    return frozenset(n.split(".", 1)[0] for n in (*names, mapping.score) if n)


def _id_fallback(mapping: FieldMapping) -> list[str]:
    """`row_id` where a row has no `id`, unless the client named the id field."""
    return [] if "id" in mapping.model_fields_set else [ID_FALLBACK]


def _records(data: bytes, filename: str, fmt: str, limits: Limits, mapping: FieldMapping) -> Iterator[tuple[int, Any]]:
    """(1-based line, record) through the one reader; its errors become MALFORMED uploads (TOO_LARGE for a
    limit). A JSONL line may hold any JSON value here (`normalize` says INVALID when it is not an object)."""
    if fmt != "parquet":
        check_line_lengths(data, limits)
    bounds = ReadLimits(
        columns=mapped_columns(mapping),
        max_rows=limits.max_rows,
        max_decoded_bytes=limits.max_decoded_bytes,
        max_field_chars=min(limits.max_line_bytes, limits.max_field_chars),
    )
    try:
        if fmt == "jsonl":
            for rec in iter_json_lines(data, name=filename):
                if rec.error is not None:
                    raise UploadError(MALFORMED, rec.error, line=rec.line)
                yield rec.line, rec.value
        else:
            for record in iter_records(data, "csv" if fmt == "csv" else "parquet", name=filename, limits=bounds):
                yield (record.line if record.line is not None else record.row + 1), record.data
    except UploadError:
        raise
    except InputError as exc:
        kind = TOO_LARGE if isinstance(exc, LimitExceeded) else MALFORMED
        raise UploadError(kind, exc.reason, line=exc.line, field=exc.field) from None


def normalize(
    records: Iterable[tuple[int, Any]],
    mapping: FieldMapping,
    default_benchmark: str,
    limits: Limits,
    explicit: Mapping[str, list[str]] | None = None,
    unit: str = "line",
) -> ParsedUpload:
    """Rows of the upload table; `mapping` as applied (see `upload_mapping`). A mapped field that is
    absent counts as null; a list of prompt fields is joined by blank lines. `explicit`: the fields the
    client named (`explicit_fields`), each of which some row must have. `unit`: what notes call a line."""
    cols: dict[str, list[Any]] = {name: [] for name in UPLOAD_SCHEMA.names}
    seen_ids: dict[tuple[str, str], int] = {}
    detected: set[str] = set()
    benchmarks: set[str] = set()
    nested: dict[str, int] = {}  # metadata field with a nested value → its first line
    check_name(default_benchmark, limits, "benchmark")
    for line, record in records:
        if not isinstance(record, Mapping):
            raise UploadError(INVALID, "expected an object (one row per line)", line=line)
        if len(cols["row_id"]) >= limits.max_rows:
            raise UploadError(TOO_LARGE, f"more than {limits.max_rows:,} rows", line=line)
        detected.update(record)
        row, row_nested, id_field = _row(record, line, mapping, default_benchmark, limits)
        for name in row_nested:
            nested.setdefault(name, line)
        key = (row["benchmark"], row["row_id"])
        if key in seen_ids:
            raise UploadError(
                INVALID,
                f"duplicate id {short(key[1])} in benchmark {short(key[0])} (first on line {seen_ids[key]})",
                line=line,
                field=id_field,
            )
        if row["benchmark"] not in benchmarks and len(benchmarks) >= limits.max_benchmarks:
            raise UploadError(
                TOO_LARGE,
                f"more than {limits.max_benchmarks:,} distinct benchmarks",
                line=line,
                field=mapping.benchmark,
            )
        seen_ids[key] = line
        benchmarks.add(row["benchmark"])
        for name, value in row.items():
            cols[name].append(value)
    if not cols["row_id"]:
        raise UploadError(MALFORMED, "empty upload: no rows")
    _check_explicit(explicit or {}, detected)
    return ParsedUpload(
        table=pa.table(cols, schema=UPLOAD_SCHEMA),
        benchmarks=sorted(benchmarks),
        detected_fields=sorted(detected),
        has_scores=any(s is not None for s in cols["score"]),
        mapping=mapping,
        notes=[
            f"metadata {name!r} holds nested values (first on {unit} {first}): stored as JSON, not used by "
            "slices or adjustment"
            for name, first in sorted(nested.items())
        ],
    )


def _row(
    record: Mapping[str, Any], line: int, mapping: FieldMapping, default_benchmark: str, limits: Limits
) -> tuple[dict[str, Any], list[str], str]:
    """One row of the upload table, every value checked against the limits; its nested metadata fields; the
    field its id came from."""

    def get(part: str) -> Any:
        name = getattr(mapping, part)
        value = dotted_get(record, name) if name else None
        return None if value is MISSING else value

    id_field, row_id = mapping.id or "id", get("id")
    if row_id is None and _id_fallback(mapping) and record.get(ID_FALLBACK) is not None:
        id_field, row_id = ID_FALLBACK, record[ID_FALLBACK]

    max_chars = limits.max_tokens_per_row * CHARS_PER_TOKEN_BOUND
    prompt = _prompt(record, mapping, line)
    response = text_value(get("response"), line, mapping.response or "response")
    if not (prompt or response):
        names = [n for n in (*_prompt_fields(mapping), mapping.response) if n]
        raise UploadError(
            INVALID, "missing text: the row has neither a prompt nor a response", line=line, field=" / ".join(names)
        )
    for part, text in (("prompt", prompt), ("response", response)):
        if text and len(text) > max_chars:
            raise UploadError(
                TOO_LARGE,
                f"text longer than the {limits.max_tokens_per_row:,}-token limit",
                line=line,
                field=" / ".join(_prompt_fields(mapping)) if part == "prompt" else mapping.response,
            )
    benchmark = text_value(get("benchmark"), line, mapping.benchmark or "benchmark") or default_benchmark
    check_name(benchmark, limits, mapping.benchmark or "benchmark", line=line)
    metadata, nested = metadata_value(record, mapping, line, limits)
    return (
        {
            "row_id": text_value(row_id, line, id_field, limits.max_field_chars) or str(line),
            "benchmark": benchmark,
            "prompt": prompt,
            "response": response,
            "reference": text_value(get("reference"), line, mapping.reference or "reference", limits.max_field_chars),
            "score": score_value(get("score"), line, mapping.score or "score"),
            "metadata": metadata,
        },
        nested,
        id_field,
    )


def check_name(name: str, limits: Limits, field: str, *, line: int | None = None) -> None:
    """A benchmark (or upload, or model) name within `max_name_chars`."""
    if len(name) > limits.max_name_chars:
        raise UploadError(
            TOO_LARGE,
            f"name is {len(name):,} characters, over the {limits.max_name_chars:,} limit",
            line=line,
            field=field,
        )


def explicit_fields(given: FieldMapping | None) -> dict[str, list[str]]:
    """The fields a client's mapping names itself (not the defaults): each must exist in the upload."""
    if given is None:
        return {}
    out: dict[str, list[str]] = {}
    for part in given.model_fields_set:
        value = getattr(given, part)
        if value:
            out[part] = [value] if isinstance(value, str) else list(value)
    return out


def _check_explicit(explicit: Mapping[str, list[str]], detected: set[str]) -> None:
    for part, names in sorted(explicit.items()):
        for name in names:
            if name.split(".", 1)[0] not in detected:
                shown = ", ".join(sorted(detected)[:20]) + (", ..." if len(detected) > 20 else "")
                raise UploadError(
                    INVALID, f"no row has the field {short(name)} (fields: {shown})", field=f"mapping.{part}"
                )


def _prompt_fields(mapping: FieldMapping) -> list[str]:
    return [mapping.prompt] if isinstance(mapping.prompt, str) else list(mapping.prompt)


def _prompt(record: Mapping[str, Any], mapping: FieldMapping, line: int) -> str | None:
    parts = []
    for name in _prompt_fields(mapping):
        value = dotted_get(record, name)
        parts.append(text_value(None if value is MISSING else value, line, name))
    if len(parts) == 1:
        return parts[0]
    return "\n\n".join(p for p in parts if p) or None


def parse_file(
    data: bytes,
    filename: str,
    content_type: str | None,
    mapping: FieldMapping | None,
    default_benchmark: str,
    limits: Limits,
    *,
    inspect: InspectOptions | None = None,
) -> ParsedUpload:
    """The upload's rows: a rows file mapped by `mapping`, or an inspect_ai log read with `inspect`'s options
    (`cg_ray.serve.inspect_uploads` says which files are logs)."""
    applied = upload_mapping(mapping)
    if len(data) > limits.max_upload_bytes:
        raise UploadError(TOO_LARGE, f"upload is {len(data):,} bytes, over the {limits.max_upload_bytes:,}-byte limit")
    if not data.strip():
        raise UploadError(MALFORMED, "empty upload: no rows")
    options = inspect or InspectOptions()
    inspect_uploads.check_options(filename, options)
    if inspect_uploads.is_inspect_log(data, filename, options):
        return parse_inspect_log(data, filename, content_type, mapping, limits, options)
    fmt = upload_format(filename, content_type)
    try:
        records = _records(data, filename, fmt, limits, applied)
        unit = "row" if fmt == "parquet" else "line"
        return normalize(records, applied, default_benchmark, limits, explicit_fields(mapping), unit)
    except UploadError as exc:
        raise exc.located(filename, "row" if fmt == "parquet" else "line") from None


def parse_inspect_log(
    data: bytes,
    filename: str,
    content_type: str | None,
    mapping: FieldMapping | None,
    limits: Limits,
    options: InspectOptions,
) -> ParsedUpload:
    """An inspect_ai log's rows (one per sample and epoch), checked as any upload's rows are."""
    if mapping is not None:
        raise UploadError(
            INVALID,
            "not used by inspect_ai logs (their fields are inspect's); choose the score with scorer_name",
            field="mapping",
            file=filename,
        )
    inspect_uploads.check_content_type(filename, content_type)
    if options.benchmark is not None:
        check_name(options.benchmark, limits, "benchmark")
    read = inspect_uploads.read_log(data, filename, options, limits)
    if not read.records:
        why = f"all {read.skipped:,} samples lack the score (missing_score: skip)" if read.skipped else "no samples"
        raise UploadError(MALFORMED if not read.skipped else INVALID, f"empty upload: {why}", file=filename)
    try:
        parsed = normalize(inspect_uploads.numbered(read.records), upload_mapping(None), "inspect", limits, unit="row")
    except UploadError as exc:
        raise exc.located(filename, "row") from None
    return dataclasses.replace(
        parsed,
        notes=[*inspect_uploads.notes(read, options), *parsed.notes],
        source=inspect_uploads.source_record(read, options),
    )


def parse_rows(rows: list[Any], mapping: FieldMapping | None, default_benchmark: str, limits: Limits) -> ParsedUpload:
    if len(rows) > limits.max_rows:
        raise UploadError(TOO_LARGE, f"{len(rows):,} rows, over the {limits.max_rows:,}-row limit")
    applied = upload_mapping(mapping)
    return normalize(enumerate(rows, start=1), applied, default_benchmark, limits, explicit_fields(mapping))
