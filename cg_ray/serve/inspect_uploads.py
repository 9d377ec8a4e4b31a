"""inspect_ai eval logs as uploads: a ``.eval`` log (a zip) or a ``.json`` log, read by the benchmark source's
own reader (`cg_ray.benchmarks.inspect.rows_from_bytes`: one row per sample and epoch, inspect's scores),
then checked row by row as any upload is (`cg_ray.serve.uploads.normalize`: limits, ids, metadata).

A ``.eval`` upload is always a log; a ``.json`` upload is one when it starts as inspect writes its logs
(``{"version": N, "status": ...``) or when the client passes an inspect option (``scorer_name``,
``missing_score``); any other ``.json`` is JSONL, as before. Before inspect reads a ``.eval``, its zip
directory is checked: the declared sizes of its entries within ``max_decoded_bytes`` (Python's zip reader
stops at the declared size, so a compression bomb cannot grow past it) and its samples within ``max_rows``.
Errors name the upload's file, the sample (id and epoch) and the field; nothing is stored unless every
sample reads.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cg_ray.errors import ConfigError, InputError
from cg_ray.serve.settings import Limits
from cg_ray.serve.upload_values import INVALID, MALFORMED, TOO_LARGE, UNSUPPORTED, UploadError

LOG_SUFFIXES = (".eval", ".json")
CONTENT_TYPES = {
    ".eval": {"application/zip", "application/x-zip-compressed", "application/octet-stream"},
    ".json": {"application/json", "text/plain", "application/octet-stream"},
}
# How inspect starts a JSON log (EvalLog's first fields, indented or not); JSONL rows do not start so.
_JSON_LOG_HEAD = re.compile(rb'\A\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')
_UNFINISHED = ("error", "cancelled", "started")


@dataclass(frozen=True)
class InspectOptions:
    """The upload options of an inspect_ai log (multipart form fields beside ``mapping``)."""

    scorer_name: str | None = None  # which of the log's scorers gives the score; None: its only one
    missing_score: Literal["error", "skip"] | None = None  # a sample without that score; None: "error"
    benchmark: str | None = None  # the rows' benchmark; None: the log's task

    @property
    def given(self) -> bool:
        """Whether the client passed an inspect-only option (a ``.json`` upload is then read as a log)."""
        return self.scorer_name is not None or self.missing_score is not None


@dataclass(frozen=True)
class LogRead:
    records: list[dict[str, Any]]  # one upload record per row, in the log's order
    skipped: int  # samples without the score, skipped (missing_score: skip)
    status: str | None  # the eval's status as the log's header says (None: not found)


def suffix_of(filename: str) -> str:
    return Path(filename).suffix.lower()


def is_inspect_log(data: bytes, filename: str, options: InspectOptions) -> bool:
    suffix = suffix_of(filename)
    if suffix == ".eval":
        return True
    return suffix == ".json" and (options.given or _JSON_LOG_HEAD.match(data[:512]) is not None)


def check_options(filename: str, options: InspectOptions) -> None:
    """Inspect-only options on a file that cannot be a log: refused, naming the option."""
    if options.given and suffix_of(filename) not in LOG_SUFFIXES:
        field = "scorer_name" if options.scorer_name is not None else "missing_score"
        raise UploadError(INVALID, "only for inspect_ai logs (.eval / .json uploads)", field=field)


def check_content_type(filename: str, content_type: str | None) -> None:
    base = (content_type or "application/octet-stream").split(";")[0].strip().lower()
    if base not in CONTENT_TYPES[suffix_of(filename)]:
        raise UploadError(UNSUPPORTED, f"content type {base!r} does not match an inspect_ai log")


def read_log(data: bytes, filename: str, options: InspectOptions, limits: Limits) -> LogRead:
    """The upload records of the log's rows (every error an UploadError naming `filename`)."""
    from cg_ray.benchmarks.inspect import rows_from_bytes

    n_samples, status = _survey(data, filename, limits)
    missing = options.missing_score or "error"
    try:
        rows = rows_from_bytes(data, filename, scorer_name=options.scorer_name, missing_score=missing)
    except InputError as exc:
        # A log that does not read is malformed (400); a sample or option the log refuses is invalid (422).
        kind = MALFORMED if exc.field is None else INVALID
        raise UploadError(kind, exc.reason, field=exc.field, file=filename) from None
    except ConfigError as exc:
        raise UploadError(UNSUPPORTED, f"this server cannot read inspect_ai logs: {exc}", file=filename) from None
    if len(rows) > limits.max_rows:
        raise UploadError(TOO_LARGE, f"more than {limits.max_rows:,} rows", file=filename)
    skipped = n_samples - len(rows) if missing == "skip" and n_samples is not None else 0
    return LogRead([_record(row, options.benchmark) for row in rows], skipped, status)


def _record(row: Any, benchmark: str | None) -> dict[str, Any]:
    refs = list(row["reference"] or [])
    return {
        "id": row["row_id"],
        "benchmark": benchmark or row["benchmark"],
        "prompt": row["prompt"],
        "response": row["response"],
        "reference": refs[0] if len(refs) == 1 else (json.dumps(refs, ensure_ascii=False) if refs else None),
        "score": row["score"],
        "metadata": row["metadata"],
    }


def _survey(data: bytes, filename: str, limits: Limits) -> tuple[int | None, str | None]:
    """The log's sample count (None: unknown) and status, checked against the limits before inspect reads it."""
    if suffix_of(filename) == ".json":
        return _survey_json(data)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise UploadError(
            MALFORMED, f"not a readable inspect_ai log: not a zip archive (truncated? {exc})", file=filename
        ) from None
    with archive:
        entries = archive.infolist()
        declared = sum(e.file_size for e in entries)
        if declared > limits.max_decoded_bytes:
            raise UploadError(
                TOO_LARGE,
                f"the log unpacks to {declared:,} bytes, over the {limits.max_decoded_bytes:,}-byte limit",
                file=filename,
            )
        n_samples = sum(1 for e in entries if e.filename.startswith("samples/") and e.filename.endswith(".json"))
        if n_samples > limits.max_rows:
            raise UploadError(
                TOO_LARGE, f"{n_samples:,} samples, over the {limits.max_rows:,}-row limit", file=filename
            )
        return n_samples, _zip_status(archive)


def _zip_status(archive: zipfile.ZipFile) -> str | None:
    names = set(archive.namelist())
    if "header.json" not in names:
        return "started" if "_journal/start.json" in names else None
    try:
        status = json.loads(archive.read("header.json")).get("status")
    except (ValueError, zipfile.BadZipFile, OSError, AttributeError):
        return None  # inspect's reader says what is wrong with it
    return status if isinstance(status, str) else None


def _survey_json(data: bytes) -> tuple[int | None, str | None]:
    try:
        doc = json.loads(data)
    except ValueError:
        return None, None  # inspect's reader says what is wrong with it
    if not isinstance(doc, dict):
        return None, None
    samples, status = doc.get("samples"), doc.get("status")
    return (len(samples) if isinstance(samples, list) else None), (status if isinstance(status, str) else None)


def numbered(records: list[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based row of the upload, record), as `normalize` takes them."""
    return enumerate(records, start=1)


def notes(read: LogRead, options: InspectOptions) -> list[str]:
    out = []
    if read.status in _UNFINISHED:
        out.append(f"the eval's status is {read.status!r} (it did not finish): the samples the log has were read")
    if read.skipped:
        score = repr(options.scorer_name) if options.scorer_name else "the"
        out.append(f"skipped {read.skipped:,} samples without {score} score (missing_score: skip)")
    return out


def source_record(read: LogRead, options: InspectOptions) -> dict[str, Any]:
    """What the upload's metadata keeps of how the log was read."""
    return {
        "kind": "inspect",
        "scorer_name": options.scorer_name,
        "missing_score": options.missing_score or "error",
        "skipped": read.skipped,
        "status": read.status,
    }
