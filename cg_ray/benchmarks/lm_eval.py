"""lm-evaluation-harness ``--log_samples`` files as rows with scores.

Each line is one document under one filter: ``{doc_id, doc, target, arguments, resps, filtered_resps,
filter, metrics, <metric>: value, ...}``. A task with several filters (e.g. gsm8k's ``strict-match`` and
``flexible-extract``) logs each document once per filter: we keep the records of one filter, one per doc.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from cg_ray.benchmarks.mapping import dotted_get, render_prompt, required
from cg_ray.benchmarks.rows import BenchmarkRow, as_references, as_score, as_text, make_row
from cg_ray.benchmarks.sources import LeaderboardSource, LmEvalSource
from cg_ray.errors import InputError
from cg_ray.io.records import iter_records, located

# Tried in order when no metric is configured.
DEFAULT_METRICS = ("acc", "exact_match", "acc_norm", "em", "f1", "bleu")
_TASK_FROM_NAME = re.compile(r"^samples_(?P<task>.+?)_\d{4}-\d{2}-\d{2}T")


def task_name(path: str) -> str:
    """``samples_gsm8k_2024-05-01T12-00-00.123456.jsonl`` -> ``gsm8k``."""
    stem = Path(path).name
    match = _TASK_FROM_NAME.match(stem)
    return match["task"] if match else Path(path).stem.removeprefix("samples_")


SamplesSource = LmEvalSource | LeaderboardSource  # the same records, in JSONL or (the leaderboard's) Parquet


def load_lm_eval(source: LmEvalSource) -> Iterator[BenchmarkRow]:
    return load_samples(source, "jsonl")


def load_samples(source: SamplesSource, fmt: Literal["jsonl", "parquet"]) -> Iterator[BenchmarkRow]:
    """The records of one filter, one row per document (see the module docstring)."""
    where = source.path
    records = list(iter_records(where, fmt))
    filters = sorted({str(r.data.get("filter", "none")) for r in records})
    chosen = _choose_filter(source, filters)
    seen: set[str] = set()
    benchmark = source.benchmark or task_name(where)
    kept = 0
    for rec in records:
        record, row = rec.data, rec.row
        if str(record.get("filter", "none")) != chosen:
            continue
        with located(rec):
            doc_id = as_text(required(record, "doc_id", where=where, row=row))
            if doc_id in seen:
                raise InputError(f"doc_id {doc_id} appears twice under filter {chosen!r}", path=where, row=row)
            seen.add(doc_id)
            out = make_row(
                row_id=f"{benchmark}-{doc_id}",
                benchmark=benchmark,
                prompt=render_prompt(source.prompt_template, _prompt(record, source, row), None),
                reference=as_references(required(record, source.reference_field, where=where, row=row)),
                scorer=source.scorer,
                score=_score(record, source, row),
                response=_response(record),
                metadata={"doc_id": doc_id, "filter": chosen, "doc_hash": record.get("doc_hash")},
            )
        yield out
        kept += 1
        if source.limit is not None and kept >= source.limit:
            return


def _choose_filter(source: SamplesSource, filters: list[str]) -> str:
    if source.filter is not None:
        if source.filter not in filters:
            raise InputError(
                f"filter {source.filter!r} not in the file (filters: {', '.join(filters)})",
                path=source.path,
                field="filter",
            )
        return source.filter
    if len(filters) == 1:
        return filters[0]
    if not filters:
        raise InputError("no records", path=source.path)
    raise InputError(
        f"records under several filters ({', '.join(filters)}); choose one with `filter:`",
        path=source.path,
        field="filter",
    )


def _prompt(record: Mapping[str, Any], source: SamplesSource, row: int) -> str:
    if source.prompt_field is not None:
        return as_text(required(record, source.prompt_field, where=source.path, row=row))
    # The rendered context the model saw (first request's first argument), as logged by the harness.
    context = dotted_get(record, "arguments.gen_args_0.arg_0")
    if not isinstance(context, str):
        context = dotted_get(record, "arguments.0.0")  # older harness versions log a list of lists
    if not isinstance(context, str):
        raise InputError(
            "no rendered prompt; set prompt_field (e.g. doc.question)", path=source.path, row=row, field="arguments"
        )
    return context


def _score(record: Mapping[str, Any], source: SamplesSource, row: int) -> float | None:
    names = [source.metric] if source.metric else [m for m in DEFAULT_METRICS if m in record]
    if not names or names[0] not in record:
        listed = record.get("metrics")
        raise InputError(
            f"no per-sample metric{' ' + repr(source.metric) if source.metric else ''} (metrics: {listed})",
            path=source.path,
            row=row,
            field=source.metric or "metric",
        )
    try:
        return as_score(record[names[0]])
    except (TypeError, ValueError) as exc:
        raise InputError(f"bad metric value: {exc}", path=source.path, row=row, field=names[0]) from None


def _response(record: Mapping[str, Any]) -> str | None:
    # Generation tasks log the filtered answer text; loglikelihood tasks log [logprob, is_greedy] pairs.
    filtered = record.get("filtered_resps")
    if isinstance(filtered, list) and filtered and isinstance(filtered[0], str):
        return filtered[0]
    resps = record.get("resps")
    if isinstance(resps, list) and resps and isinstance(resps[0], list) and resps[0] and isinstance(resps[0][0], str):
        return resps[0][0]
    return None
