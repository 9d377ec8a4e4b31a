"""Validate an uploaded battles file (LMSYS Chatbot Arena layout) before it is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cg_ray.artifacts.publish import atomic_file
from cg_ray.serve.settings import Limits
from cg_ray.serve.uploads import (
    INVALID,
    MALFORMED,
    TOO_LARGE,
    UNSUPPORTED,
    UploadError,
    check_line_lengths,
    check_name,
)

SUFFIXES = (".jsonl", ".parquet")


def validate_battles(
    data: bytes, filename: str, uploads_dir: Path, upload_id: str, limits: Limits
) -> tuple[Path, dict[str, Any]]:
    """Parse every battle from the uploaded bytes (the loader names the line or record, and the field, of a
    bad one); store the file only if all are valid. Returns the stored path and a summary (battles, models)."""
    from cg_ray.benchmarks.arena import parse_uploaded_battles
    from cg_ray.errors import InputError, LimitExceeded
    from cg_ray.io.records import ReadLimits

    suffix = Path(filename).suffix.lower()
    if suffix not in SUFFIXES:
        raise UploadError(UNSUPPORTED, f"unsupported battles file type {suffix or '(none)'!r}: use .jsonl or .parquet")
    if not data.strip():
        raise UploadError(MALFORMED, "empty upload: no battles")
    check_name(filename, limits, "file")
    if suffix == ".jsonl":
        check_line_lengths(data, limits)
    bounds = ReadLimits(max_rows=limits.max_rows, max_decoded_bytes=limits.max_decoded_bytes)
    try:
        battles = parse_uploaded_battles(data, filename, bounds)
    except InputError as exc:
        kind = TOO_LARGE if isinstance(exc, LimitExceeded) else INVALID
        raise UploadError(kind, exc.reason, line=exc.line, field=exc.field) from None
    models = sorted({m for b in battles.battles for m in (b.model_a, b.model_b)})
    if len(models) > limits.max_benchmarks:
        raise UploadError(TOO_LARGE, f"{len(models):,} models, over the {limits.max_benchmarks:,} limit")
    for model in models:
        check_name(model, limits, "model_a / model_b")
    if not battles.battles:
        raise UploadError(MALFORMED, "no battles in the upload")
    uploads_dir.mkdir(parents=True, exist_ok=True)
    path = uploads_dir / f"{upload_id}{suffix}"
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)
    return path, {"n_battles": len(battles.battles), "models": models}
