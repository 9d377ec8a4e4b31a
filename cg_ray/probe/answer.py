"""The evaluated model answers the checked items through the pipeline's own generation backends (vLLM, HF,
the OpenAI-compatible endpoint) on Ray Data, and each answer is scored by the item's scorer, as the suite's
rows are. Answers are handed to `save` as the stream yields them (the probe's work directory keeps them), so
a killed probe resumes without sending an answered item again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cg_ray.benchmarks.rows import make_row, rows_table
from cg_ray.generation.config import GenerationConfig
from cg_ray.scoring.apply import score_row

log = logging.getLogger(__name__)

BENCHMARK = "probe"


@dataclass(frozen=True)
class Question:
    item_id: str
    prompt: str
    reference: str
    scorer: str


@dataclass(frozen=True)
class Answer:
    item_id: str
    response: str | None
    score: float | None
    status: str  # scored | unparsed | no_response (cg_ray.scoring.apply.score_row)


def answer(
    questions: Sequence[Question],
    gen: GenerationConfig,
    done: Mapping[str, Answer],
    save: Callable[[list[Answer]], None],
) -> dict[str, Answer]:
    """Every question answered and scored; those in `done` (answered by an earlier attempt) are not asked
    again, each batch of new ones goes to `save` as soon as it is scored."""
    import ray.data

    from cg_ray.generation import make_generator
    from cg_ray.generation.local_ray import join_or_start_ray

    out = dict(done)
    todo = [q for q in questions if q.item_id not in out]
    if todo:
        log.info("the model answers %d items (%d answered before)", len(todo), len(questions) - len(todo))
        join_or_start_ray(gen, log_to_driver=True)  # inside `ray job submit`: the job's cluster
        by_id = {q.item_id: q for q in todo}
        rows = [
            make_row(row_id=q.item_id, benchmark=BENCHMARK, prompt=q.prompt, reference=[q.reference], scorer=q.scorer)
            for q in todo
        ]
        stream = make_generator(gen).generate(ray.data.from_arrow(rows_table(rows)))
        for batch in stream.iter_batches(batch_format="pyarrow", batch_size=16):
            table: Any = batch  # a pyarrow.Table (batch_format="pyarrow"); Ray types it as any batch format
            scored = [
                _scored(by_id[r["row_id"]], r["response"]) for r in table.select(["row_id", "response"]).to_pylist()
            ]
            out.update((a.item_id, a) for a in scored)
            save(scored)
    return {q.item_id: out[q.item_id] for q in questions}


def _scored(q: Question, response: str | None) -> Answer:
    row: Any = {"row_id": q.item_id, "scorer": q.scorer, "response": response, "reference": [q.reference]}
    score, status = score_row(row)
    return Answer(q.item_id, response, score, status)
