"""The judge pass: rows scored by ``judge`` are graded by a model through the generation backend.

Each such row becomes a request row whose prompt is ``judge_prompt(question, response, reference)``; the
original prompt, response and metadata ride along inside the request's metadata, so any backend (vLLM,
HF, fake) can run the pass unchanged. After generation the judge's text lands in ``judge_output`` of the
restored row, and the ``judge`` scorer parses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc

from cg_ray.generation.base import GENERATED_SCHEMA, N_OUTPUT_TOKENS
from cg_ray.scoring.judge import JUDGE_OUTPUT, judge_prompt

if TYPE_CHECKING:
    import ray.data

    from cg_ray.generation.config import GenerationConfig

JUDGED_SCHEMA: Final = GENERATED_SCHEMA.append(pa.field(JUDGE_OUTPUT, pa.string(), nullable=True))
_STASH: Final = "cg_judged"


def _judge_mask(batch: pa.Table) -> pa.Array:
    mask = pc.and_(pc.equal(batch["scorer"], "judge"), pc.is_null(batch["score"]))
    return pc.fill_null(pc.and_(mask, pc.is_valid(batch["response"])), False)


def _select(*, judged: bool) -> Callable[[pa.Table], pa.Table]:
    def select(batch: pa.Table) -> pa.Table:
        mask = _judge_mask(batch)
        return batch.filter(mask if judged else pc.invert(mask))

    return select


def to_request(batch: pa.Table) -> pa.Table:
    rows = batch.to_pylist()
    for row in rows:
        stash = {k: row[k] for k in ("prompt", "response", "metadata", N_OUTPUT_TOKENS)}
        row["metadata"] = json.dumps({_STASH: stash})
        row["prompt"] = judge_prompt(stash["prompt"], stash["response"], row["reference"] or [])
        row["response"] = None
    return pa.Table.from_pylist(rows, schema=GENERATED_SCHEMA)


def from_request(batch: pa.Table) -> pa.Table:
    rows = batch.to_pylist()
    for row in rows:
        stash = json.loads(row["metadata"])[_STASH]
        row[JUDGE_OUTPUT] = row["response"]
        row.update(stash)
    return pa.Table.from_pylist(rows, schema=JUDGED_SCHEMA)


def without_judge(batch: pa.Table) -> pa.Table:
    """Generated rows as the judge pass leaves the rows it does not grade: `judge_output` null."""
    return batch.select(GENERATED_SCHEMA.names).append_column(JUDGE_OUTPUT, pa.nulls(batch.num_rows, pa.string()))


def judge_dataset(ds: ray.data.Dataset, config: GenerationConfig) -> ray.data.Dataset:
    """Lazy: generated rows (``GENERATED_SCHEMA``) plus ``judge_output`` where a judge graded the row."""
    from cg_ray.generation import make_generator

    todo = ds.map_batches(_select(judged=True), batch_format="pyarrow")
    rest = ds.map_batches(_select(judged=False), batch_format="pyarrow").map_batches(
        without_judge, batch_format="pyarrow"
    )
    if todo.count() == 0:
        return rest
    requests = todo.map_batches(to_request, batch_format="pyarrow")
    graded = make_generator(config).generate(requests).map_batches(from_request, batch_format="pyarrow")
    return graded.union(rest)
