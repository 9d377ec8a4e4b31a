"""Row metadata (the optional `metadata` JSON column of rows.parquet) as categorical codes per field.

A field is analysed when its values are flat (string / number / bool) and it has at most `max_values`
distinct values over the whole file; a field with a nested value (object / list) or too many values is
skipped and the reason kept for the output summary. Nothing here is an error except a value of the column
that is not a JSON object, which is reported with its file, row and field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from cg_ray import schemas as S
from cg_ray.errors import InputError

MAX_VALUES = 50


def value_text(value: object) -> str | None:
    """A flat metadata value as text (3.0 → "3", True → "true"); None for nested values."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str | int | float):
        return str(value)
    return None


@dataclass
class FieldCodes:
    """Distinct values of one field in first-seen order; `skipped` says why the field is not analysed."""

    name: str
    values: dict[str, int] = field(default_factory=dict)
    skipped: str | None = None


@dataclass
class MetadataCoder:
    """Turns batches of metadata JSON strings into per-field integer codes (-1: the row lacks the field)."""

    path: str
    max_values: int = MAX_VALUES
    fields: dict[str, FieldCodes] = field(default_factory=dict)

    def encode(self, batch: list[str | None], first_row: int) -> dict[str, npt.NDArray[np.int32]]:
        parsed: list[dict[str, Any]] = []
        for i, raw in enumerate(batch):
            if raw is None or raw == "":
                parsed.append({})
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"invalid JSON ({exc.msg})", path=self.path, row=first_row + i, field=S.METADATA
                ) from None
            if not isinstance(obj, dict):
                raise InputError("is not a JSON object", path=self.path, row=first_row + i, field=S.METADATA)
            parsed.append(obj)
        codes: dict[str, npt.NDArray[np.int32]] = {}
        for obj in parsed:
            for name in obj:
                if name not in self.fields:
                    self.fields[name] = FieldCodes(name)
        for name, state in self.fields.items():
            if state.skipped is not None:
                continue
            out = np.full(len(parsed), -1, dtype=np.int32)
            for i, obj in enumerate(parsed):
                if name not in obj or obj[name] is None:
                    continue
                text = value_text(obj[name])
                if text is None:
                    state.skipped = f"nested value (first at row {first_row + i})"
                    break
                code = state.values.setdefault(text, len(state.values))
                if len(state.values) > self.max_values:
                    state.skipped = f"more than {self.max_values} distinct values"
                    break
                out[i] = code
            if state.skipped is None:
                codes[name] = out
        return codes

    def analysed(self) -> dict[str, list[str]]:
        """field → its values in code order, for the fields still analysed."""
        return {n: list(s.values) for n, s in self.fields.items() if s.skipped is None}

    def skipped(self) -> dict[str, str]:
        return {n: s.skipped for n, s in self.fields.items() if s.skipped is not None}
