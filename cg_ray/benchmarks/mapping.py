"""Turning one source record into a normalized row through a field mapping."""

from __future__ import annotations

import string
from collections.abc import Mapping

from cg_ray.benchmarks.rows import BenchmarkRow, as_references, as_score, as_text, make_row
from cg_ray.benchmarks.sources import FieldMapping
from cg_ray.errors import InputError

MISSING = object()


def dotted_get(record: Mapping[str, object], path: str) -> object:
    """``record["doc"]["question"]`` for ``"doc.question"``; a missing key gives the sentinel ``MISSING``."""
    value: object = record
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def required(record: Mapping[str, object], path: str, *, where: str, row: int) -> object:
    value = dotted_get(record, path)
    if value is MISSING:
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


def _choices(record: Mapping[str, object], fields: FieldMapping, *, where: str, row: int) -> list[str] | None:
    if fields.choices is None:
        return None
    if isinstance(fields.choices, list):
        return [as_text(required(record, f, where=where, row=row)) for f in fields.choices]
    raw = required(record, fields.choices, where=where, row=row)
    if raw is not None and not isinstance(raw, list):
        raise InputError("choices must be a list", path=where, row=row, field=fields.choices)
    return None if raw is None else [as_text(c) for c in raw]


def _index_to_letter(value: str, fields: FieldMapping, choices: list[str] | None, *, where: str, row: int) -> str:
    base = fields.reference_index_base or 0
    try:
        index = int(value) - base
    except ValueError:
        raise InputError(f"reference {value!r} is not an index", path=where, row=row, field=fields.reference) from None
    if choices is None or not 0 <= index < len(choices):
        raise InputError(
            f"reference index {value} out of range of the choices", path=where, row=row, field=fields.reference
        )
    return f"({string.ascii_uppercase[index]})"


def map_record(
    record: Mapping[str, object],
    fields: FieldMapping,
    *,
    where: str,
    row: int,
    benchmark: str,
    scorer: str,
    prompt_template: str | None,
    id_prefix: str = "row",
) -> BenchmarkRow:
    """Apply ``fields`` to ``record``; every mapped field must be present (null values are allowed), but
    the benchmark field, whose absence means ``benchmark``. Without an id field, the id is
    ``<id_prefix>-<row index>``."""
    row_id = as_text(required(record, fields.id, where=where, row=row)) if fields.id else f"{id_prefix}-{row}"
    named_benchmark = dotted_get(record, fields.benchmark) if fields.benchmark else None
    if named_benchmark is not MISSING and named_benchmark not in (None, ""):
        benchmark = as_text(named_benchmark)
    prompt_fields = [fields.prompt] if isinstance(fields.prompt, str) else fields.prompt
    parts = [required(record, f, where=where, row=row) for f in prompt_fields]
    for f, part in zip(prompt_fields, parts, strict=True):
        if not isinstance(part, str) or not part.strip():
            raise InputError("prompt must be a non-empty string", path=where, row=row, field=f)
    prompt = "\n\n".join(p for p in parts if isinstance(p, str))  # all are: checked above
    choices = _choices(record, fields, where=where, row=row)
    reference = as_references(required(record, fields.reference, where=where, row=row)) if fields.reference else []
    if fields.reference_index_base is not None:
        reference = [_index_to_letter(r, fields, choices, where=where, row=row) for r in reference]
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
    named = [fields.id, fields.benchmark, *prompt_fields, fields.reference, fields.score, fields.response, fields.model]
    named += [fields.choices] if isinstance(fields.choices, str) else list(fields.choices or [])
    mapped = {p.split(".")[0] for p in named if p}
    if fields.metadata is None:
        metadata = {k: v for k, v in record.items() if k not in mapped}
    else:
        metadata = {k: dotted_get(record, k) for k in fields.metadata if dotted_get(record, k) is not MISSING}
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
