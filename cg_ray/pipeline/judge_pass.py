"""The judge pass: rows scored by ``judge`` are graded by a model through the generation backend.

One stream, no split: every generated row becomes a request row. A row to grade gets the prompt
``judge_prompt(question, response, reference)`` and no response, so the backend answers it; every other row
keeps an answer, so the backend passes it through (see `cg_ray.generation.base.Generator`). Each row's own
prompt, response, model and metadata ride along inside the request's metadata, so any backend (vLLM, HF,
fake) runs the pass unchanged, and each generated row is generated once and judged at most once: no
``materialize()``, no ``count()``. (Splitting the stream into graded and other rows and taking the
``union`` would run generation twice: Ray Data executes each branch's upstream separately.) After the
pass the judge's text lands in ``judge_output`` of the restored row, and the ``judge`` scorer parses it.
"""

from __future__ import annotations

import json
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
_KEPT: Final = ("prompt", "response", "model", "metadata", N_OUTPUT_TOKENS)  # what the request overwrites
_GRADED: Final = "graded"


def _judge_mask(batch: pa.Table) -> pa.Array:
    mask = pc.and_(pc.equal(batch["scorer"], "judge"), pc.is_null(batch["score"]))
    return pc.fill_null(pc.and_(mask, pc.is_valid(batch["response"])), False)


def to_request(batch: pa.Table) -> pa.Table:
    """Each row as a request: a judge prompt without a response for a row to grade, else the row with its
    answer (which the backend passes through); the row's own columns ride along in the metadata."""
    rows = batch.to_pylist()
    for row, graded in zip(rows, _judge_mask(batch).to_pylist(), strict=True):
        stash = {k: row[k] for k in _KEPT}
        row["metadata"] = json.dumps({_STASH: {**stash, _GRADED: graded}})
        if graded:
            row["prompt"] = judge_prompt(stash["prompt"], stash["response"], row["reference"] or [])
            row["response"] = None
        elif row["response"] is None:
            row["response"] = ""  # not to grade: an answer, so that no backend generates one
    return pa.Table.from_pylist(rows, schema=GENERATED_SCHEMA)


def from_request(batch: pa.Table) -> pa.Table:
    """The rows as they were, with the judge's text in ``judge_output`` where it graded them."""
    rows = batch.to_pylist()
    for row in rows:
        stash = json.loads(row["metadata"])[_STASH]
        row[JUDGE_OUTPUT] = row["response"] if stash.pop(_GRADED) else None
        row.update(stash)
    return pa.Table.from_pylist(rows, schema=JUDGED_SCHEMA)


def without_judge(batch: pa.Table) -> pa.Table:
    """Generated rows as the judge pass leaves the rows it does not grade: `judge_output` null."""
    return batch.select(GENERATED_SCHEMA.names).append_column(JUDGE_OUTPUT, pa.nulls(batch.num_rows, pa.string()))


def judge_dataset(ds: ray.data.Dataset, config: GenerationConfig) -> ray.data.Dataset:
    """Lazy, streaming: generated rows (``GENERATED_SCHEMA``) plus ``judge_output`` where a judge graded the
    row. It starts the judge's backend whatever the rows are; a caller whose rows have no ``judge`` scorer
    (known from its input, see `cg_ray.pipeline.runner`) uses `without_judge` instead."""
    from cg_ray.generation import make_generator

    requests = ds.map_batches(to_request, batch_format="pyarrow")
    return make_generator(config).generate(requests).map_batches(from_request, batch_format="pyarrow")
