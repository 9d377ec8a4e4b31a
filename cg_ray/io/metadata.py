"""Row metadata as the product stores it: one JSON object per row (the `metadata` column of rows.parquet, of
the extract output and of the service's uploads; an object, or that object's JSON text, in exported rows).

Flat values (string, number, boolean) are what slices and adjustment analyse; nested values (objects, lists,
such as the probe suite's `facts`) are kept as JSON and skipped there with a note
(`cg_ray.profile.metadata`). This module only reads and checks the object; it never decides what is analysed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from cg_ray.io.records import decode_json

MAX_DEPTH = 16  # levels of nesting in one metadata value (the probes' `facts` use 2)


class MetadataError(ValueError):
    """A metadata object or value that JSON cannot hold; `field` is the dotted path of the bad value."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def metadata_object(value: object) -> dict[str, object] | None:
    """The row's metadata object: None for null or empty; a mapping as a dict; a string decoded as the JSON
    object it holds (as rows.parquet, the extract output and a JSONL export of them carry it)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        decoded, error = decode_json(value)
        if error is not None:
            raise MetadataError(f"expected an object or its JSON text: {error}")
        if decoded is None:
            return None
        value = decoded
    if not isinstance(value, Mapping):
        raise MetadataError(f"expected an object or its JSON text, got {type(value).__name__}")
    return dict(value)


def check_json_value(value: object, where: str, depth: int = 0) -> None:
    """`value` is one JSON holds exactly: null, a string, a boolean, a finite number, or lists and objects
    (string keys) of those, at most MAX_DEPTH levels deep. Otherwise MetadataError naming the dotted path."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MetadataError("a metadata number must be finite", where)
        return
    if depth >= MAX_DEPTH:
        raise MetadataError(f"nested deeper than {MAX_DEPTH} levels", where)
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_json_value(item, f"{where}.{i}", depth + 1)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise MetadataError(f"an object key must be a string, got {type(key).__name__}", where)
            check_json_value(item, f"{where}.{key}", depth + 1)
    else:
        raise MetadataError(
            f"a metadata value must be a string, number, boolean, list or object, not {type(value).__name__}", where
        )


def metadata_json(values: Mapping[str, object]) -> str:
    """The stored form: keys sorted, text unescaped, as the pipeline writes rows (checked values only)."""
    return json.dumps(dict(values), sort_keys=True, ensure_ascii=False, allow_nan=False)


def value_json(value: object) -> str:
    """One value as stored inside the object (for its length)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
