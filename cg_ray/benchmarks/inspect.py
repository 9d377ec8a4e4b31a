"""inspect_ai eval logs (``.eval`` or ``.json``) as rows with scores, read with inspect's own log API.

One row per sample and epoch: ``<task>-<sample id>#<epoch>``, so the epochs of a sample form one group by
the row-id rule of `cg_ray.profile.groups` and never straddle cross-fitting folds. The input is the prompt (a
string as it is; chat messages rendered one per block, ``role:`` then the text, as inspect's own sample
tables render them), the output's completion the response, the chosen scorer's value the score (inspect's
``value_to_float``: C / I / P / N → 1 / 0 / 0.5 / 0, yes / true → 1, numbers as they are; lists, dicts and
other text are refused rather than silently read as 0), and the sample's target and metadata are kept.

The header is read first (status, task, model, scorers), then the samples one at a time
(``read_eval_log_samples``): a large ``.eval`` log is never held whole. A log whose eval did not finish
(status error / cancelled / started) is read with a warning naming the status: its samples are those it has.
inspect_ai is an optional extra (``pip install 'cg_ray[inspect]'``), imported only here, when a log is read.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cg_ray.benchmarks.mapping import render_prompt
from cg_ray.benchmarks.rows import BenchmarkRow, as_references, as_score, make_row
from cg_ray.benchmarks.sources import InspectSource
from cg_ray.errors import ConfigError, InputError

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

log = logging.getLogger(__name__)

LOG_SUFFIXES = (".eval", ".json")
UNFINISHED = ("error", "cancelled", "started")
# The strings inspect's value_to_float maps (besides numbers); any other text it would read as 0 with a warning.
_VALUE_WORDS = frozenset({"c", "i", "p", "n", "yes", "no", "true", "false"})
# Not needed for a row, and the bulk of an agentic sample.
_SKIPPED_FIELDS = {"events", "store"}


@dataclass(frozen=True)
class _Log:
    path: str
    header: EvalLog

    @property
    def model(self) -> str:
        return str(self.header.eval.model)

    @property
    def scorers(self) -> list[str]:
        results = self.header.results
        return [s.name for s in results.scores] if results is not None else []


def _api() -> Any:
    try:
        import inspect_ai.log as inspect_log
    except ImportError:
        raise ConfigError(
            "kind: inspect reads logs with inspect_ai, an optional extra: pip install 'cg_ray[inspect]'"
        ) from None
    return inspect_log


def log_files(path: str) -> list[str]:
    """The log at `path`, or the logs under a folder (inspect's own listing: ``.eval`` files and ``.json``
    files named as inspect names them), in name order."""
    where = Path(path).expanduser()
    if where.is_file():
        return [str(where)]
    if not where.is_dir():
        raise InputError("no such log file or folder", path=str(where))
    infos = _api().list_eval_logs(str(where), recursive=True)
    found = sorted(str(info.name).removeprefix("file://") for info in infos)
    if not found:
        raise InputError(f"no inspect_ai logs ({' or '.join(LOG_SUFFIXES)}) in the folder", path=str(where))
    return found


def read_header(path: str) -> EvalLog:
    """The log's header; anything that is not a readable inspect_ai log is an InputError naming the file."""
    if not path.endswith(LOG_SUFFIXES):
        raise InputError(f"not an inspect_ai log: expected a {' or '.join(LOG_SUFFIXES)} file", path=path)
    try:
        header: EvalLog = _api().read_eval_log(path, header_only=True)
    except Exception as exc:  # inspect's readers raise whatever their zip / JSON / pydantic layers raise
        raise InputError(f"not a readable inspect_ai log ({type(exc).__name__}: {_short(exc)})", path=path) from None
    return header


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"


def _chosen_logs(source: InspectSource) -> list[_Log]:
    logs = [_Log(p, read_header(p)) for p in log_files(source.path)]
    models = sorted({lg.model for lg in logs})
    if source.model is not None:
        logs = [lg for lg in logs if lg.model == source.model]
        if not logs:
            raise InputError(
                f"no log of model {source.model!r} (models: {', '.join(models)})", path=source.path, field="model"
            )
    elif len(models) > 1:
        raise InputError(
            f"logs of several models ({', '.join(models)}); choose one with `model:`", path=source.path, field="model"
        )
    for lg in logs:
        if lg.header.status in UNFINISHED:
            log.warning(
                "%s: the eval's status is %r (it did not finish): reading the samples the log has",
                lg.path,
                lg.header.status,
            )
    return logs


def scorer_name(lg: _Log, source: InspectSource) -> str | None:
    """The scorer whose value is the score (None: the samples' only one, decided per sample). A name the
    log's results do not list is refused here, before any sample is read."""
    names = lg.scorers
    if source.scorer_name is not None:
        if names and source.scorer_name not in names:
            raise InputError(
                f"no scorer {source.scorer_name!r} in the log (scorers: {', '.join(names)})",
                path=lg.path,
                field="scorer_name",
            )
        return source.scorer_name
    if len(names) > 1:
        raise InputError(
            f"the log has several scorers ({', '.join(names)}); choose one with scorer_name / --scorer-name",
            path=lg.path,
            field="scorer_name",
        )
    return names[0] if names else None


def load_inspect(source: InspectSource) -> Iterator[BenchmarkRow]:
    inspect_log = _api()
    seen: dict[str, str] = {}
    kept = 0
    for lg in _chosen_logs(source):
        benchmark = source.benchmark or str(lg.header.eval.task).split("/")[-1]
        name = scorer_name(lg, source) if source.scorer == "precomputed" else None
        skipped = 0
        samples = inspect_log.read_eval_log_samples(
            lg.path,
            all_samples_required=lg.header.status not in UNFINISHED,
            resolve_attachments=True,
            exclude_fields=_SKIPPED_FIELDS,
        )
        for index, sample in enumerate(_guarded(samples, lg.path)):
            where = _Where(lg.path, index, sample.id, sample.epoch)
            row_id = f"{benchmark}-{sample.id}#{sample.epoch}"
            if row_id in seen:
                raise where.error(f"row id {row_id!r} again (first in {seen[row_id]})", "id")
            seen[row_id] = lg.path
            score = _score(sample, name, where) if source.scorer == "precomputed" else None
            if score is None and source.scorer == "precomputed":
                if source.missing_score == "error":
                    raise where.error(
                        f"no {name or 'score'!r} score ({_why_unscored(sample)}); skip such samples with "
                        "missing_score: skip (--skip-missing-scores)",
                        f"scores.{name}" if name else "scores",
                    )
                skipped += 1
                continue
            yield _row(sample, lg, benchmark, row_id, score, source)
            kept += 1
            if source.limit is not None and kept >= source.limit:
                _report_skipped(lg.path, skipped, name)
                return
        _report_skipped(lg.path, skipped, name)


@dataclass(frozen=True)
class _Where:
    path: str
    index: int
    sample: object
    epoch: int

    def error(self, message: str, field: str) -> InputError:
        return InputError(
            f"sample {self.sample!r}, epoch {self.epoch}: {message}", path=self.path, row=self.index, field=field
        )


def _guarded(samples: Iterator[EvalSample], path: str) -> Iterator[EvalSample]:
    """The samples, with inspect's read errors (a truncated or corrupt log) as InputErrors naming the file."""
    index = 0
    while True:
        try:
            sample = next(samples)
        except StopIteration:
            return
        except Exception as exc:  # zip / JSON / pydantic errors of inspect's readers, as read_header
            raise InputError(
                f"not a readable inspect_ai log: sample {index} cannot be read (truncated or corrupt? "
                f"{type(exc).__name__}: {_short(exc)})",
                path=path,
                row=index,
            ) from None
        yield sample
        index += 1


def _report_skipped(path: str, skipped: int, name: str | None) -> None:
    if skipped:
        log.warning("%s: skipped %d samples without a %r score (missing_score: skip)", path, skipped, name or "score")


def _why_unscored(sample: EvalSample) -> str:
    if sample.error is not None:
        return f"the sample failed: {_short(Exception(sample.error.message), 120)}"
    names = sorted(sample.scores or {})
    return f"scores: {', '.join(names)}" if names else "the sample has no scores"


def _score(sample: EvalSample, name: str | None, where: _Where) -> float | None:
    scores = sample.scores or {}
    if name is None:
        if len(scores) > 1:
            raise where.error(f"several scores ({', '.join(sorted(scores))}); choose one with scorer_name", "scores")
        name = next(iter(scores), None)
    if name is None or name not in scores:
        return None
    field = f"scores.{name}.value"
    value = scores[name].value
    if isinstance(value, float) and math.isnan(value):  # inspect's "unscored" sentinel
        return None
    if isinstance(value, list | dict) or (
        isinstance(value, str) and value.strip().lower() not in _VALUE_WORDS and not _is_number(value)
    ):
        raise where.error(f"a score of {value!r} has no float value (C / I / P / N, yes / no, or a number)", field)
    from inspect_ai.scorer import value_to_float

    try:
        return as_score(value_to_float()(value))
    except ValueError as exc:
        raise where.error(f"{exc} (value {value!r})", field) from None


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def render_input(value: str | list[Any]) -> str:
    """A sample's input as text: a string as it is, one user message as its text, else every message as
    ``role:`` and its text (tool calls named), blocks separated by a blank line."""
    if isinstance(value, str):
        return value
    if len(value) == 1 and value[0].role == "user":
        return str(value[0].text)
    blocks = []
    for message in value:
        block = f"{message.role}:\n{(message.text or '').strip()}"
        for call in getattr(message, "tool_calls", None) or []:
            block += f"\nTool Call: {call.function}({call.arguments})"
        blocks.append(block)
    return "\n\n".join(blocks)


def _row(
    sample: EvalSample, lg: _Log, benchmark: str, row_id: str, score: float | None, source: InspectSource
) -> BenchmarkRow:
    completion = sample.output.completion if sample.output is not None else ""
    metadata = {
        "sample_id": sample.id,
        "epoch": sample.epoch,
        "target": sample.target,
        "task": lg.header.eval.task,
        **(sample.metadata or {}),  # the sample's own metadata wins a clash
    }
    return make_row(
        row_id=row_id,
        benchmark=benchmark,
        prompt=render_prompt(source.prompt_template, render_input(sample.input), None),
        reference=as_references(sample.target),
        scorer=source.scorer,
        score=score,
        response=completion or "",
        model=lg.model,
        metadata=metadata,
    )


def write_scored_rows(rows: Sequence[BenchmarkRow], path: Path) -> Path:
    """`rows` as the scored-rows JSONL `cg-ray extract` reads (id, benchmark, model, score, prompt, response,
    metadata), written atomically: the extract input made from inspect logs, kept beside its output."""
    from cg_ray.artifacts.publish import atomic_file

    with atomic_file(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            record = {
                "id": row["row_id"],
                "benchmark": row["benchmark"],
                "model": row["model"],
                "score": row["score"],
                "prompt": row["prompt"],
                "response": row["response"],
                "metadata": json.loads(row["metadata"]),
            }
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def rows_from_bytes(
    data: bytes, filename: str, *, scorer_name: str | None = None, missing_score: str = "error"
) -> list[BenchmarkRow]:
    """The rows of one uploaded log (`filename`: its name, `.eval` or `.json`), for an upload route: inspect's
    readers take a path, so the bytes go to a private temporary file for the read. Errors name `filename`."""
    import tempfile

    suffix = Path(filename).suffix
    if suffix not in LOG_SUFFIXES:
        raise InputError(f"not an inspect_ai log: expected a {' or '.join(LOG_SUFFIXES)} file", path=filename)
    with tempfile.TemporaryDirectory(prefix="cg-inspect-") as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(data)
        source = InspectSource.model_validate(
            {"kind": "inspect", "path": str(path), "scorer_name": scorer_name, "missing_score": missing_score}
        )
        try:
            return list(load_inspect(source))
        except InputError as exc:  # name the upload, not the temporary file
            raise InputError(exc.reason, path=filename, row=exc.row, field=exc.field) from None
