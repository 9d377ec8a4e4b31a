"""The evaluated model answers the checked items through the pipeline's own generation backends (vLLM, HF,
the OpenAI-compatible endpoint) on Ray Data, and each answer is scored by the item's scorer, as the suite's
rows are. The items enter Ray Data in blocks of one batch each, and each block's answers are handed to `save` as it
leaves the stream (the probe's work directory keeps them), so a killed probe resumes without sending an
answered item again and asks again at most the batches that were in flight."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cg_ray.benchmarks.rows import make_row, rows_table
from cg_ray.generation.config import GenerationConfig
from cg_ray.io.blocks import blocks_dataset
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
        items = rows_table(rows)
        step = gen.resources.batch_size
        blocks = [items.slice(i, step) for i in range(0, items.num_rows, step)]
        # One block per batch of the answering stage: a block's answers leave Ray Data (and are saved) as soon
        # as its batch returns, so a kill loses the batches in flight (endpoint.concurrency or max_actors of
        # them, 4 × 16 items by default) and those answered but still in Ray Data's post-processing (measured
        # in tests/probe/test_probe_kill.py: 6-7 batches of 4 on a loaded 2-core machine). One block for all
        # the items (as `from_arrow` of one table makes) left the stage only at the end: a killed probe had
        # saved nothing. A smaller block would not lose less: the stage bundles blocks up to its batch size.
        stream = make_generator(gen).generate(blocks_dataset(blocks))
        for batch in stream.iter_batches(batch_format="pyarrow", batch_size=None):  # each block as it returns
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
