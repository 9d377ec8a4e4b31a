"""Validate an uploaded battles file (LMSYS Chatbot Arena layout) before it is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cg_ray.artifacts.publish import atomic_file
from cg_ray.serve.uploads import INVALID, MALFORMED, UNSUPPORTED, UploadError

SUFFIXES = (".jsonl", ".parquet")


def validate_battles(data: bytes, filename: str, uploads_dir: Path, upload_id: str) -> tuple[Path, dict[str, Any]]:
    """Parse every battle from the uploaded bytes (the loader names the line or record, and the field, of a
    bad one); store the file only if all are valid. Returns the stored path and a summary (battles, models)."""
    from cg_ray.benchmarks.arena import parse_uploaded_battles
    from cg_ray.errors import InputError

    suffix = Path(filename).suffix.lower()
    if suffix not in SUFFIXES:
        raise UploadError(UNSUPPORTED, f"unsupported battles file type {suffix or '(none)'!r}: use .jsonl or .parquet")
    if not data.strip():
        raise UploadError(MALFORMED, "empty upload: no battles")
    try:
        battles = parse_uploaded_battles(data, filename)
    except InputError as exc:
        raise UploadError(INVALID, exc.reason, line=exc.line, field=exc.field) from None
    if not battles.battles:
        raise UploadError(MALFORMED, "no battles in the upload")
    uploads_dir.mkdir(parents=True, exist_ok=True)
    path = uploads_dir / f"{upload_id}{suffix}"
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)
    models = sorted({m for b in battles.battles for m in (b.model_a, b.model_b)})
    return path, {"n_battles": len(battles.battles), "models": models}
