"""Loaders for local files: any JSONL/CSV/Parquet with a field mapping, the project's normalized JSONL,
and scored model outputs joined onto normalized rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from cg_ray.benchmarks.mapping import map_record, required
from cg_ray.benchmarks.rows import BenchmarkRow, as_score, as_text
from cg_ray.benchmarks.sources import FieldMapping, LocalSource, ModelOutputsSource, NormalizedSource
from cg_ray.errors import InputError
from cg_ray.io.records import iter_records, located

NORMALIZED_FIELDS = FieldMapping(
    id="id", prompt="prompt", reference="reference", choices="choices", metadata=["metadata"]
)


def load_local(source: LocalSource) -> Iterator[BenchmarkRow]:
    default_name = source.benchmark or Path(source.path).stem
    for record in islice(iter_records(source.path, source.format), source.limit):
        with located(record):
            row = map_record(
                record.data,
                source.fields,
                where=source.path,
                row=record.row,
                benchmark=default_name,
                scorer=source.scorer,
                prompt_template=source.prompt_template,
                id_prefix=f"{default_name}-{Path(source.path).stem}",
            )
        yield row


def load_normalized(source: NormalizedSource) -> Iterator[BenchmarkRow]:
    for record in islice(iter_records(source.path, "jsonl"), source.limit):
        with located(record):
            name = source.benchmark or as_text(required(record.data, "benchmark", where=source.path, row=record.row))
            mapped = map_record(
                record.data,
                NORMALIZED_FIELDS,
                where=source.path,
                row=record.row,
                benchmark=name,
                scorer=source.scorer,
                prompt_template=source.prompt_template,
            )
        yield _unwrap_metadata(mapped)


def _unwrap_metadata(row: BenchmarkRow) -> BenchmarkRow:
    # The normalized format nests its metadata one level down: keep the inner object, not {"metadata": …}.
    outer = json.loads(row["metadata"])
    inner = outer.get("metadata")
    row["metadata"] = json.dumps(inner if isinstance(inner, dict) else outer, sort_keys=True, ensure_ascii=False)
    return row


def load_model_outputs(source: ModelOutputsSource) -> Iterator[BenchmarkRow]:
    """Benchmark rows (in their file order) with the chosen model's output and score attached."""
    outputs = _outputs_by_id(source)
    rescore = source.scorer != "precomputed"
    base = NormalizedSource(
        kind="normalized",
        path=source.path,
        benchmark=source.benchmark,
        scorer=source.scorer,
        prompt_template=source.prompt_template,
    )
    kept = 0
    for row in load_normalized(base):
        found = outputs.get(row["row_id"])
        if found is None:
            if source.on_missing == "error":
                raise InputError(f"no output for row id {row['row_id']!r}", path=source.outputs)
            continue
        output, score, model = found
        row["response"] = output
        row["model"] = model
        row["score"] = None if rescore else score
        yield row
        kept += 1
        if source.limit is not None and kept >= source.limit:
            return
    if kept == 0:
        raise InputError(f"no output id matches a row of {source.path}", path=source.outputs)


def _output(
    record: dict[str, Any], source: ModelOutputsSource, where: str, row: int
) -> tuple[str | None, str, tuple[str | None, float | None, str]]:
    """(model, id, (output, score, model)) of one outputs record; model None: another model's, skipped."""
    model = as_text(required(record, "model", where=where, row=row))
    if source.model is not None and model != source.model:
        return None, "", (None, None, model)
    row_id = as_text(required(record, "id", where=where, row=row))
    output: Any = required(record, "output", where=where, row=row)
    try:
        score = as_score(required(record, "score", where=where, row=row))
    except (TypeError, ValueError) as exc:
        raise InputError(f"bad score: {exc}", path=where, row=row, field="score") from None
    return model, row_id, (None if output is None else as_text(output), score, model)


def _outputs_by_id(source: ModelOutputsSource) -> dict[str, tuple[str | None, float | None, str]]:
    where = source.outputs
    by_model: dict[str, dict[str, tuple[str | None, float | None, str]]] = {}
    for record in iter_records(where, "jsonl"):
        with located(record):
            model, row_id, output = _output(record.data, source, where, record.row)
        if model is None:
            continue
        per_model = by_model.setdefault(model, {})
        if row_id in per_model:
            raise InputError(f"duplicate output for id {row_id!r} and model {model!r}", path=where, line=record.line)
        per_model[row_id] = output
    if not by_model:
        wanted = f" for model {source.model!r}" if source.model else ""
        raise InputError(f"no outputs{wanted}", path=where, field="model" if source.model else None)
    if len(by_model) > 1:
        raise InputError(
            f"outputs of several models ({', '.join(sorted(by_model))}); choose one with `model:`",
            path=where,
            field="model",
        )
    return next(iter(by_model.values()))
