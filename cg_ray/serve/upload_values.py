"""What an upload's values must be, and the error naming the file, line and field of one that is not.

Every value a client sends passes one of these checks before it is stored (`cg_ray.serve.uploads`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import SupportsFloat, SupportsIndex

from cg_ray.benchmarks.mapping import MISSING, dotted_get
from cg_ray.benchmarks.sources import FieldMapping
from cg_ray.errors import InputError
from cg_ray.io.metadata import MetadataError, check_json_value, metadata_json, metadata_object, value_json
from cg_ray.profile.metadata import value_text
from cg_ray.serve.settings import Limits

MAX_METADATA_FIELDS = 32

# What went wrong with an upload; the API edge (cg_ray.serve.errors) decides the HTTP status of each.
MALFORMED = "malformed"  # not readable as the format it claims
TOO_LARGE = "too_large"  # over a size limit
UNSUPPORTED = "unsupported"  # a file type or content type we do not read
INVALID = "invalid"  # readable, but a value is wrong


class UploadError(InputError):
    """A bad upload, located by file, 1-based line (as an editor shows it; `unit` "row" in Parquet) and field."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        line: int | None = None,
        field: str | None = None,
        file: str | None = None,
        unit: str = "line",
    ) -> None:
        self.kind, self.line, self.field, self.unit = kind, line, field, unit
        self.path, self.row, self.reason = file, None, message
        parts = (file or "", f"{unit} {line}" if line else "", f"field {field!r}" if field else "")
        where = ", ".join(p for p in parts if p)
        Exception.__init__(self, f"{where}: {message}" if where else message)

    def located(self, file: str, unit: str) -> UploadError:
        """The same error naming the file it is about (Parquet rows have no lines: `unit` "row")."""
        return UploadError(self.kind, self.reason, line=self.line, field=self.field, file=file, unit=unit)


def text_value(value: object, line: int, field: str, max_chars: int | None = None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UploadError(INVALID, f"expected text, got {type(value).__name__}", line=line, field=field)
    try:
        text = value if isinstance(value, str) else str(value)
    except ValueError:  # an integer of thousands of digits
        raise UploadError(INVALID, "number too long to use as text", line=line, field=field) from None
    if max_chars is not None and len(text) > max_chars:
        raise UploadError(TOO_LARGE, f"{len(text):,} characters, over the {max_chars:,} limit", line=line, field=field)
    return text


def score_value(value: object, line: int, field: str) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):  # JSON true / false: as the CSV path refuses "True"
        raise UploadError(INVALID, f"score {value!r} is a boolean, not a number", line=line, field=field)
    try:
        if not isinstance(value, str | bytes | bytearray | SupportsFloat | SupportsIndex):
            raise TypeError  # what float() refuses
        score = float(value)
    except (TypeError, ValueError, OverflowError):
        raise UploadError(INVALID, f"score {short(value)} is not a number in [0, 1]", line=line, field=field) from None
    if math.isnan(score) or not 0.0 <= score <= 1.0:
        raise UploadError(INVALID, f"score {short(value)} is outside [0, 1]", line=line, field=field)
    return score


def short(value: object) -> str:
    """A value for a message, cut to 40 characters (a client's 10,000-digit number is not echoed back)."""
    try:
        text = repr(value)
    except ValueError:
        return "(a number too long to show)"
    return text if len(text) <= 40 else text[:37] + "..."


def metadata_value(
    record: Mapping[str, object], mapping: FieldMapping, line: int, limits: Limits
) -> tuple[str | None, list[str]]:
    """The row's metadata as a JSON object string, and the fields holding nested values (kept, not analysed):
    the fields `mapping.metadata` names, else the record's `metadata` (an object, or its JSON text as
    rows.parquet holds it). Every value must be one JSON holds (finite numbers) and short."""
    if mapping.metadata is not None:
        values = {name: dotted_get(record, name) for name in mapping.metadata}
        values = {k: v for k, v in values.items() if v is not MISSING}
        where = "mapping.metadata"
    else:
        try:
            values = metadata_object(record.get("metadata")) or {}
        except MetadataError as exc:
            raise UploadError(INVALID, str(exc), line=line, field="metadata") from None
        where = "metadata"
    if len(values) > MAX_METADATA_FIELDS:
        raise UploadError(TOO_LARGE, f"more than {MAX_METADATA_FIELDS} metadata fields", line=line, field=where)
    for name, value in values.items():
        try:
            check_json_value(value, str(name))
        except MetadataError as exc:
            raise UploadError(INVALID, str(exc), line=line, field=exc.field) from None
        if len(str(name)) > limits.max_name_chars or len(value_json(value)) > limits.max_field_chars:
            raise UploadError(TOO_LARGE, "metadata name or value too long", line=line, field=str(name)[:40])
    nested = [str(name) for name, value in values.items() if value is not None and value_text(value) is None]
    return (metadata_json(values) if values else None), nested
