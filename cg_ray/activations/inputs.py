"""Reading scored rows for `cg-ray extract`: JSONL rows, optionally joined with benchmark prompts.

A row needs an id (`id` or `row_id`), a `benchmark`, a `score` in [0, 1] (null allowed only when
scores are not required) and the text fields the chosen text mode reads: `prompt` and/or `response`
(`output` is accepted for the response, as in `model_outputs/*.jsonl`). Texts may be strings or lists of
turns. An optional `metadata` object is kept (joined benchmark rows contribute theirs; the row's own keys
win). Every problem is reported with its file, 1-based line and field, before any model is loaded.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cg_ray.config import TextMode
from cg_ray.errors import InputError
from cg_ray.io.records import iter_jsonl

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

Turns = tuple[str, ...]


@dataclass(frozen=True)
class ScoredRow:
    row_id: str
    benchmark: str
    model: str | None
    score: float | None
    prompt: Turns
    response: Turns
    where: str  # "file:line", for error messages
    metadata: dict[str, Any] | None = None


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise InputError("input file not found", path=str(path))
    return iter_jsonl(path)


def _turns(value: Any, path: Path, line_no: int, field: str) -> Turns:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InputError(f"line {line_no}: expected a string or a list of strings", path=str(path), field=field)


def _score(value: Any, path: Path, line_no: int, required: bool) -> float | None:
    if value is None:
        if required:
            raise InputError(f"line {line_no}: score is missing (scores are required)", path=str(path), field="score")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"line {line_no}: score must be a number, got {value!r}", path=str(path), field="score")
    if not 0.0 <= value <= 1.0:
        raise InputError(f"line {line_no}: score {value} is outside [0, 1]", path=str(path), field="score")
    return float(value)


def _metadata(value: Any, path: Path, line_no: int) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InputError(
            f"line {line_no}: metadata must be a JSON object, got {type(value).__name__}",
            path=str(path),
            field="metadata",
        )
    return value


def _benchmark_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(p.glob("*.jsonl"))
        else:
            files.append(p)
    return files


def load_benchmark_records(paths: Sequence[Path]) -> dict[str, tuple[Turns, dict[str, object] | None]]:
    """id → (prompt turns, metadata object or None), from benchmark JSONL files or directories of them."""
    records: dict[str, tuple[Turns, dict[str, object] | None]] = {}
    for f in _benchmark_files(paths):
        for line_no, rec in _jsonl(f):
            rid = rec.get("id")
            if not isinstance(rid, str | int):
                raise InputError(f"line {line_no}: id is missing", path=str(f), field="id")
            records[str(rid)] = (
                _turns(rec.get("prompt"), f, line_no, "prompt"),
                _metadata(rec.get("metadata"), f, line_no),
            )
    return records


def load_rows(
    path: Path,
    *,
    text: TextMode,
    require_score: bool = True,
    benchmark_prompts: dict[str, Turns] | None = None,
    model: str | None = None,
    limit: int | None = None,
    benchmark_metadata: dict[str, dict[str, object] | None] | None = None,
) -> list[ScoredRow]:
    rows: list[ScoredRow] = []
    seen: dict[tuple[str, str], int] = {}
    for line_no, rec in _jsonl(path):
        if model is not None and rec.get("model") != model:
            continue
        rid = rec.get("row_id", rec.get("id"))
        if not isinstance(rid, str | int) or isinstance(rid, bool) or str(rid) == "":
            raise InputError(f"line {line_no}: id is missing (id or row_id)", path=str(path), field="id")
        bench = rec.get("benchmark")
        if not isinstance(bench, str) or not bench:
            raise InputError(f"line {line_no}: benchmark is missing", path=str(path), field="benchmark")
        row_model = rec.get("model")
        if row_model is not None and not isinstance(row_model, str):
            raise InputError(f"line {line_no}: model must be a string", path=str(path), field="model")
        score = _score(rec.get("score"), path, line_no, require_score)
        response_field = "response" if "response" in rec else "output"
        response = _turns(rec.get(response_field), path, line_no, response_field)
        if benchmark_prompts is not None and "prompt" not in rec:
            if str(rid) not in benchmark_prompts:
                raise InputError(
                    f"line {line_no}: id {rid!r} is in none of the joined benchmark files",
                    path=str(path),
                    field="id",
                )
            prompt = benchmark_prompts[str(rid)]
        else:
            prompt = _turns(rec.get("prompt"), path, line_no, "prompt")
        needed = (
            [("prompt", prompt)]
            if text == "prompt"
            else [(response_field, response)]
            if text == "response"
            else [
                ("prompt", prompt),
                (response_field, response),
            ]
        )
        for field, turns in needed:
            if not turns or not any(t.strip() for t in turns):
                raise InputError(f"line {line_no}: empty text (text mode {text!r})", path=str(path), field=field)
        key = (bench, str(rid))
        if key in seen:
            raise InputError(
                f"line {line_no}: duplicate (benchmark, id) {key}, first on line {seen[key]}"
                " (several models in one file? select one with --model)",
                path=str(path),
                field="id",
            )
        seen[key] = line_no
        own = _metadata(rec.get("metadata"), path, line_no)
        joined = (benchmark_metadata or {}).get(str(rid))
        metadata = {**(joined or {}), **(own or {})} if (own or joined) else None
        rows.append(ScoredRow(str(rid), bench, row_model, score, prompt, response, f"{path}:{line_no}", metadata))
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise InputError("no rows" + (f" for model {model!r}" if model else ""), path=str(path))
    return rows


def row_text(row: ScoredRow, mode: TextMode, tokenizer: PreTrainedTokenizerBase | None) -> tuple[str, bool]:
    """The text the reader reads, and whether the tokenizer should add its special tokens.

    Raw: turns joined by blank lines (tokenizer adds its usual specials). Chat template: prompt turns as
    user messages, response turns as assistant messages, alternating; the template supplies specials."""
    prompt = row.prompt if mode in ("prompt", "prompt_response") else ()
    response = row.response if mode in ("response", "prompt_response") else ()
    if tokenizer is None:
        return "\n\n".join((*prompt, *response)), True
    messages: list[dict[str, str]] = []
    for i in range(max(len(prompt), len(response))):
        if i < len(prompt):
            messages.append({"role": "user", "content": prompt[i]})
        if i < len(response):
            messages.append({"role": "assistant", "content": response[i]})
    return str(tokenizer.apply_chat_template(messages, tokenize=False)), False
