"""The normalized benchmark row every loader yields, and its Arrow schema (fixed, so Ray Data blocks from
different benchmarks always concatenate: a column that is null in one benchmark keeps its type).

``reference`` is always a list of acceptable answers (one element for most benchmarks, several for
NQ-open, empty when there is none, e.g. open-ended chat prompts). ``metadata`` is a JSON string because
its keys differ from benchmark to benchmark.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, SupportsFloat, SupportsIndex, TypedDict

import pyarrow as pa

ROW_ID: Final = "row_id"
BENCHMARK: Final = "benchmark"
PROMPT: Final = "prompt"
REFERENCE: Final = "reference"
CHOICES: Final = "choices"
SCORER: Final = "scorer"
SCORE: Final = "score"
RESPONSE: Final = "response"
MODEL: Final = "model"
METADATA: Final = "metadata"

BENCHMARK_ROW_SCHEMA: Final = pa.schema(
    [
        pa.field(ROW_ID, pa.string(), nullable=False),
        pa.field(BENCHMARK, pa.string(), nullable=False),
        pa.field(PROMPT, pa.string(), nullable=False),
        pa.field(REFERENCE, pa.list_(pa.string()), nullable=False),
        pa.field(CHOICES, pa.list_(pa.string()), nullable=True),
        pa.field(SCORER, pa.string(), nullable=False),
        pa.field(SCORE, pa.float64(), nullable=True),
        pa.field(RESPONSE, pa.string(), nullable=True),
        pa.field(MODEL, pa.string(), nullable=True),
        pa.field(METADATA, pa.string(), nullable=False),
    ]
)
COLUMNS: Final = tuple(BENCHMARK_ROW_SCHEMA.names)


class BenchmarkRow(TypedDict):
    row_id: str
    benchmark: str
    prompt: str
    reference: list[str]
    choices: list[str] | None
    scorer: str
    score: float | None
    response: str | None
    model: str | None
    metadata: str


def make_row(
    *,
    row_id: str,
    benchmark: str,
    prompt: str,
    reference: Sequence[str] = (),
    choices: Sequence[str] | None = None,
    scorer: str,
    score: float | None = None,
    response: str | None = None,
    model: str | None = None,
    metadata: Mapping[str, object] | None = None,
) -> BenchmarkRow:
    return BenchmarkRow(
        row_id=row_id,
        benchmark=benchmark,
        prompt=prompt,
        reference=list(reference),
        choices=None if choices is None else list(choices),
        scorer=scorer,
        score=score,
        response=response,
        model=model,
        metadata=json.dumps(dict(metadata or {}), sort_keys=True, ensure_ascii=False, default=str),
    )


def as_text(value: object) -> str:
    """A scalar answer as text (numbers from CSV/JSON keep their natural form: 18, not 18.0)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def as_references(value: object) -> list[str]:
    """A gold answer (string, number, list of acceptable strings, or null) as a list of strings."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(value, list | tuple):
        return [as_text(v) for v in value if v is not None]
    return [as_text(value)]


def as_score(value: object) -> float | None:
    """A per-row score in [0, 1]; booleans count as 0/1. Raises ValueError outside [0, 1]."""
    if value is None:
        return None
    if not isinstance(value, str | bytes | SupportsFloat | SupportsIndex):  # what float() takes
        raise TypeError(f"float() argument must be a string or a real number, not {type(value).__name__!r}")
    score = float(value)
    if math.isnan(score):
        return None
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"score {score} is outside [0, 1]")
    return score


def rows_table(rows: Iterable[BenchmarkRow]) -> pa.Table:
    """Rows as an Arrow table with the fixed schema (the input of `cg_ray.io.blocks.arrow_dataset`)."""
    return pa.Table.from_pylist(list(rows), schema=BENCHMARK_ROW_SCHEMA)
