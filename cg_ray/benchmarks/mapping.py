"""Turning one source record into a normalized row through a field mapping."""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from cg_ray.benchmarks.rows import BenchmarkRow, as_references, as_score, as_text, make_row
from cg_ray.benchmarks.sources import FieldMapping
from cg_ray.errors import InputError

_MISSING = object()


def dotted_get(record: Mapping[str, Any], path: str) -> Any:
    """``record["doc"]["question"]`` for ``"doc.question"``; a missing key gives the sentinel ``_MISSING``."""
    value: Any = record
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def required(record: Mapping[str, Any], path: str, *, where: str, row: int) -> Any:
    value = dotted_get(record, path)
    if value is _MISSING:
        raise InputError(
            f"missing field (present: {', '.join(sorted(record)) or 'none'})", path=where, row=row, field=path
        )
    return value


def render_choices(choices: list[str] | None) -> str:
    if not choices:
        return ""
    letters = string.ascii_uppercase
    return "\n".join(f"({letters[i]}) {c}" for i, c in enumerate(choices))


def render_prompt(template: str | None, prompt: str, choices: list[str] | None) -> str:
    # Plain replacement, not str.format: prompts are full of braces (code, LaTeX).
    if template is None:
        return prompt
    return template.replace("{choices}", render_choices(choices)).replace("{prompt}", prompt)


def map_record(
    record: Mapping[str, Any],
    fields: FieldMapping,
    *,
    where: str,
    row: int,
    benchmark: str,
    scorer: str,
    prompt_template: str | None,
) -> BenchmarkRow:
    """Apply ``fields`` to ``record``; every mapped field must be present (null values are allowed)."""
    row_id = as_text(required(record, fields.id, where=where, row=row)) if fields.id else str(row)
    prompt = required(record, fields.prompt, where=where, row=row)
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError("prompt must be a non-empty string", path=where, row=row, field=fields.prompt)
    reference = as_references(required(record, fields.reference, where=where, row=row)) if fields.reference else []
    choices = None
    if fields.choices:
        raw = required(record, fields.choices, where=where, row=row)
        if raw is not None and not isinstance(raw, list):
            raise InputError("choices must be a list", path=where, row=row, field=fields.choices)
        choices = None if raw is None else [as_text(c) for c in raw]
    score = None
    if fields.score:
        try:
            score = as_score(required(record, fields.score, where=where, row=row))
        except (TypeError, ValueError) as exc:
            raise InputError(f"bad score: {exc}", path=where, row=row, field=fields.score) from None
    response = None
    if fields.response:
        raw_response = required(record, fields.response, where=where, row=row)
        response = None if raw_response is None else as_text(raw_response)
    model = as_text(required(record, fields.model, where=where, row=row)) if fields.model else None
    mapped = {p.split(".")[0] for p in (fields.id, fields.prompt, fields.reference, fields.choices) if p}
    mapped |= {p.split(".")[0] for p in (fields.score, fields.response, fields.model) if p}
    if fields.metadata is None:
        metadata = {k: v for k, v in record.items() if k not in mapped}
    else:
        metadata = {k: dotted_get(record, k) for k in fields.metadata if dotted_get(record, k) is not _MISSING}
    return make_row(
        row_id=row_id,
        benchmark=benchmark,
        prompt=render_prompt(prompt_template, prompt, choices),
        reference=reference,
        choices=choices,
        scorer=scorer,
        score=score,
        response=response,
        model=model,
        metadata=metadata,
    )
