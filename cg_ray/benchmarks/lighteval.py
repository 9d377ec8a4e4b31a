"""lighteval ``--save-details`` files as rows with scores.

``details_<task>_<timestamp>.parquet`` has one record per document: ``doc`` (``id``, ``query``, ``choices``,
``gold_index``, ``task_name``, ``specific``…), ``model_response`` (``input``: what was sent, ``text`` /
``text_post_processed``: the generations, logprobs…) and ``metric`` (metric name → value). Mapped as the
lm-eval samples are: the prompt sent, the (post-processed) generation, the gold choice(s), one metric as
the score, the doc id (else the row's index). The older flat layout (``full_prompt``, ``predictions``,
``gold``, ``metrics``: lighteval up to 0.3, the Open LLM Leaderboard's first details) reads the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cg_ray.benchmarks.mapping import dotted_get, render_prompt, required
from cg_ray.benchmarks.rows import BenchmarkRow, as_score, as_text, make_row
from cg_ray.benchmarks.sources import LightevalSource
from cg_ray.errors import InputError
from cg_ray.io.records import iter_records

# Tried in order when no metric is configured and a record has several.
DEFAULT_METRICS = ("acc", "em", "exact_match", "extractive_match", "quasi_exact_match", "acc_norm", "pass@1", "f1")
_TASK_FROM_NAME = re.compile(r"^details_(?P<task>.+?)_\d{4}-\d{2}-\d{2}T")


def task_name(path: str) -> str:
    """``details_lighteval|gsm8k|0_2025-01-01T00-00-00.parquet`` -> ``gsm8k`` (suite and few-shot count dropped)."""
    stem = Path(path).stem
    match = _TASK_FROM_NAME.match(stem)
    task = match["task"] if match else stem.removeprefix("details_")
    parts = task.split("|") if "|" in task else task.split(":")  # suite|task|few-shot (results use ':')
    return parts[1] if len(parts) == 3 and parts[1] else task


def load_lighteval(source: LightevalSource) -> Iterator[BenchmarkRow]:
    where = source.path
    benchmark = source.benchmark or task_name(where)
    seen: set[str] = set()
    for n, rec in enumerate(iter_records(where, "parquet")):
        if source.limit is not None and n >= source.limit:
            return
        record, row = _as_current(rec.data), rec.row
        for part in ("doc", "metric"):
            if not isinstance(record.get(part), Mapping):
                raise InputError(
                    f"not a lighteval details record (no {part!r} struct; columns: {', '.join(sorted(record))})",
                    path=where,
                    row=row,
                    field=part,
                )
        doc_id = as_text(record["doc"].get("id") or row)
        if doc_id in seen:
            raise InputError(f"doc id {doc_id} appears twice", path=where, row=row, field="doc.id")
        seen.add(doc_id)
        choices = [as_text(c) for c in record["doc"].get("choices") or []]
        yield make_row(
            row_id=f"{benchmark}-{doc_id}",
            benchmark=benchmark,
            prompt=render_prompt(source.prompt_template, _prompt(record, source, row), None),
            reference=record["doc"].get("gold_texts") or _gold(record["doc"].get("gold_index"), choices, where, row),
            choices=choices or None,
            scorer=source.scorer,
            score=_score(record["metric"], source, row),
            response=_response(record.get("model_response")),
            metadata={
                "doc_id": doc_id,
                "task": record["doc"].get("task_name"),
                "specific": record["doc"].get("specific"),
            },
        )


def _as_current(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """A record of lighteval's older flat layout (up to 0.3, as in the Open LLM Leaderboard's first details:
    ``example``, ``full_prompt``, ``predictions``, ``gold``, ``choices``, ``gold_index``, ``metrics``,
    ``specifics``) in the current one; a current record as it is."""
    if "doc" in record or "metrics" not in record:
        return record
    predictions = record.get("predictions")
    choices = record.get("choices") or []
    gold = record.get("gold")
    return {
        "doc": {
            "query": record.get("example"),
            "choices": choices,
            "gold_index": record.get("gold_index"),
            # A generative task logs its gold answers as text and has no choices to index.
            "gold_texts": [as_text(g) for g in gold] if isinstance(gold, list) and not choices else None,
            "specific": record.get("specifics"),
        },
        "model_response": {
            "input": record.get("full_prompt"),
            "text": [p for p in predictions if isinstance(p, str)] if isinstance(predictions, list) else [],
        },
        "metric": record.get("metrics"),
    }


def _prompt(record: Mapping[str, Any], source: LightevalSource, row: int) -> str:
    if source.prompt_field is not None:
        return as_text(required(record, source.prompt_field, where=source.path, row=row))
    sent = dotted_get(record, "model_response.input")
    if isinstance(sent, str) and sent.strip():
        return sent
    query = dotted_get(record, "doc.query")
    if not isinstance(query, str) or not query.strip():
        raise InputError(
            "no prompt: model_response.input and doc.query are empty; set prompt_field",
            path=source.path,
            row=row,
            field="doc.query",
        )
    return query


def _gold(gold: object, choices: list[str], where: str, row: int) -> list[str]:
    indices = gold if isinstance(gold, list) else [] if gold is None else [gold]
    out = []
    for index in indices:
        if not isinstance(index, int) or not 0 <= index < max(len(choices), 1):
            raise InputError(f"gold index {index!r} outside the choices", path=where, row=row, field="doc.gold_index")
        out.append(choices[index] if choices else as_text(index))
    return out


def _score(metrics: Mapping[str, Any], source: LightevalSource, row: int) -> float | None:
    present = [k for k, v in metrics.items() if v is not None]
    if source.metric is not None:
        name = source.metric
    elif len(present) == 1:
        name = present[0]
    else:
        name = next((m for m in DEFAULT_METRICS if m in present), "")
    value = metrics.get(name) if name else None
    if value is None:  # absent, or null in this record (Parquet gives every record every metric's column)
        raise InputError(
            f"no per-sample metric {name or '(none chosen)'!r} (metrics: {', '.join(present) or 'none'}); "
            "choose one with `metric:`",
            path=source.path,
            row=row,
            field=f"metric.{name}" if name else "metric",
        )
    try:
        return as_score(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"bad metric value: {exc}", path=source.path, row=row, field=f"metric.{name}") from None


def _response(response: object) -> str | None:
    # Generative tasks log the text (post-processed where the task does); loglikelihood tasks log none.
    if not isinstance(response, Mapping):
        return None
    for key in ("text_post_processed", "text"):
        texts = response.get(key)
        if isinstance(texts, list) and texts and isinstance(texts[0], str):
            return texts[0]
    return None
