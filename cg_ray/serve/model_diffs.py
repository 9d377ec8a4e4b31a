"""diff-models in the service: two models' answers from the caller's uploads, paired by id, each response
read with its prompt as context by the service's encoder, then compared as `cg-ray diff-models` does
(`cg_ray.compare.model_diff_job.compare_pairs`), published atomically into the analysis' folder.

Besides the files of `cg-ray diff-models`, the folder keeps pairs.parquet (the compared prompts, both
answers and their pooled s̃) so that the paired examples of any concept can be shown, not only a
hypothesis'.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy import sparse

from cg_ray.artifacts.layout import MODEL_DIFF_PAIRS, ModelDiffDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.compare.model_diff import active_matrix
from cg_ray.compare.model_diff_config import DiffModelsConfig, DiffModelsMethod, DiffModelsReader
from cg_ray.compare.model_diff_job import ModelDiffResult, ReadResult, compare_pairs, trim_pairs
from cg_ray.compare.pairs import Answer, Pair, PairedAnswers, pair_answers, reader_texts
from cg_ray.errors import InputError
from cg_ray.labels import ConceptLabels
from cg_ray.serve.analyses import Withdrawn, encode_in_chunks, run_guarded
from cg_ray.serve.comparison_types import DiffModelsRequest
from cg_ray.serve.db import Analysis, Store, Upload
from cg_ray.serve.encoding import Encoder, SpanOptions
from cg_ray.serve.settings import ServiceSettings

MODE = "diff-models"
PAIRS_FILE = MODEL_DIFF_PAIRS  # named in cg_ray/artifacts/layout.py


@dataclass(frozen=True)
class Side:
    """One model's answers: an upload, only its rows whose benchmark is `model` when given, and a name."""

    upload: Upload
    model: str | None
    name: str
    field: str  # the request field a problem with this side is reported under


def side_answers(side: Side) -> dict[str, Answer]:
    """id -> answer, in upload order. Refused (line = the row's 1-based position in the upload): an id twice,
    an empty response or prompt; a model with no rows."""
    table = pq.read_table(side.upload.path, columns=["row_id", "benchmark", "prompt", "response"])
    columns = [table.column(name).to_pylist() for name in table.column_names]
    out: dict[str, Answer] = {}
    where = f"upload {side.upload.id!r}"
    for line, (rid, bench, prompt, response) in enumerate(zip(*columns, strict=True), start=1):
        if side.model is not None and bench != side.model:
            continue
        if rid in out:
            first = out[rid].where[1]
            raise InputError(
                f"{where}: id {rid!r} twice (first on line {first}); rows are paired by id", line=line, field="id"
            )
        for name, text in (("response", response), ("prompt", prompt)):
            if text is None or not text.strip():
                raise InputError(
                    f"{where}: id {rid!r} has an empty {name}; diff-models reads both", line=line, field=name
                )
        out[rid] = Answer(rid, prompt, response, (side.upload.id, line))
    if not out:
        models = ", ".join(sorted(side.upload.benchmarks)[:60])
        raise InputError(f"{where} has no rows of model {side.model!r} (its models: {models})", field=side.field)
    return out


def pair_sides(a: Side, b: Side, method: DiffModelsMethod) -> PairedAnswers:
    """The answers paired by id (ids of one side only are counted and skipped); a prompt that differs
    between the sides is refused (InputError naming the upload, line and field)."""
    try:
        paired = pair_answers(side_answers(a), side_answers(b))
    except InputError as exc:
        if exc.field is None:  # nothing paired
            raise InputError(f"no id is in both {a.upload.id!r} and {b.upload.id!r}", field=b.field) from None
        raise
    return trim_pairs(paired, None, method.match_length)


def run_config(method: DiffModelsMethod, a: Side, b: Side, settings: ServiceSettings) -> DiffModelsConfig:
    """The run's configuration as `cg-ray diff-models` records it: the inputs are upload ids."""
    if a.upload.id == b.upload.id:
        inputs: dict[str, Any] = {"answers": a.upload.id, "model_a": a.model, "model_b": b.model}
    else:
        inputs = {"a": a.upload.id, "b": b.upload.id}
    reader = DiffModelsReader(**settings.reader.model_dump(exclude_unset=True))
    settings_only = method.model_dump(include=set(DiffModelsMethod.model_fields))
    return DiffModelsConfig(**settings_only, **inputs, reader=reader)


def span_options(method: DiffModelsMethod) -> SpanOptions:
    options: SpanOptions = {"pool": method.pool}
    if method.max_response_tokens is not None:
        options["span_tokens"] = method.max_response_tokens
    return options


def pairs_table(result: ModelDiffResult) -> pa.Table:
    """The compared pairs with both answers' pooled s̃ (sparse: concept ids and activations per answer)."""

    def sparse_rows(m: sparse.csr_matrix) -> tuple[pa.Array, pa.Array]:
        spans = list(zip(m.indptr[:-1], m.indptr[1:], strict=True))
        ids = pa.array([m.indices[s:e].astype(np.int32) for s, e in spans], pa.list_(pa.int32()))
        acts = pa.array([m.data[s:e].astype(np.float32) for s, e in spans], pa.list_(pa.float32()))
        return ids, acts

    ids_a, acts_a = sparse_rows(result.acts_a.tocsr())
    ids_b, acts_b = sparse_rows(result.acts_b.tocsr())
    return pa.table(
        {
            "id": [p.id for p in result.pairs],
            "prompt": [p.prompt for p in result.pairs],
            "response_a": [p.response_a for p in result.pairs],
            "response_b": [p.response_b for p in result.pairs],
            "concept_ids_a": ids_a,
            "concept_acts_a": acts_a,
            "concept_ids_b": ids_b,
            "concept_acts_b": acts_b,
        }
    ).replace_schema_metadata({"d_sae": str(result.acts_a.shape[1])})


@functools.lru_cache(maxsize=8)
def read_pairs(path: str) -> tuple[list[Pair], sparse.csr_matrix, sparse.csr_matrix]:
    """pairs.parquet back: the pairs and both sides' pooled s̃ (prompts × d_sae)."""
    table = pq.read_table(path)
    d_sae = int((table.schema.metadata or {})[b"d_sae"])
    pairs = [
        Pair(*row)
        for row in zip(
            *(table.column(c).to_pylist() for c in ("id", "prompt", "response_a", "response_b")), strict=True
        )
    ]

    def side(s: str) -> sparse.csr_matrix:
        ids = [np.asarray(x, np.int32) for x in table.column(f"concept_ids_{s}").to_pylist()]
        acts = [np.asarray(x, np.float32) for x in table.column(f"concept_acts_{s}").to_pylist()]
        return active_matrix(ids, acts, d_sae)

    return pairs, side("a"), side("b")


def _compare_and_publish(
    config: DiffModelsConfig,
    paired: PairedAnswers,
    read: ReadResult,
    names: tuple[str, str],
    labels: ConceptLabels | None,
    out: Path,
    wanted: Callable[[], bool],
) -> None:
    from cg_ray.compare.model_diff_outputs import write_files

    def names_for(d_sae: int) -> Callable[[int], tuple[str | None, str | None]]:
        return lambda c: (labels.get(c) if labels is not None else None, None)

    result = compare_pairs(config, paired, lambda texts, offsets: read, names_for, names=names)
    with atomic_directory(out, overwrite=True) as tmp:
        folder = ModelDiffDir(tmp)
        write_files(result, folder)
        folder.write_table(PAIRS_FILE, pairs_table(result))
        if not wanted():
            raise Withdrawn()


async def run_diff_models(
    store: Store, encoder: Encoder, analysis_id: str, settings: ServiceSettings, labels: ConceptLabels | None
) -> None:
    async def work(analysis: Analysis, wanted: Callable[[], bool]) -> Path:
        body = DiffModelsRequest.model_validate(analysis.options)
        a, b = request_sides(store, analysis.owner, body)
        paired = pair_sides(a, b, body)
        texts, offsets, _ = reader_texts(paired.pairs)
        options = span_options(body)
        encoded = await encode_in_chunks(
            store,
            analysis_id,
            texts,
            lambda start, stop: encoder.encode_spans(texts[start:stop], offsets[start:stop], options),
        )
        store.update_analysis(analysis_id, progress=0.9, message="comparing the answers")
        read = ReadResult(
            concept_ids=[np.asarray(e.concept_ids, np.int32) for e in encoded],
            concept_acts=[np.asarray(e.concept_acts, np.float32) for e in encoded],
            n_tokens=[int(e.n_tokens) for e in encoded],
            d_sae=encoder.d_sae,
            reader={"d_sae": encoder.d_sae, "read": dict(options), "source": "service encoder"},
        )
        out = settings.analyses_dir / analysis_id
        config = run_config(body, a, b, settings)
        names = (a.name, b.name)
        await asyncio.to_thread(_compare_and_publish, config, paired, read, names, labels, out, wanted)
        return out

    await run_guarded(store, analysis_id, work)


def request_sides(store: Store, owner: str, body: DiffModelsRequest) -> tuple[Side, Side]:
    """The two sides a (checked) request names: one upload split by model, or one upload each."""

    def upload(upload_id: str | None, field: str) -> Upload:
        row: Upload | None = store.get_owned(Upload, owner, str(upload_id))
        if row is None:  # deleted since (a running analysis' uploads cannot be), or never the caller's
            raise InputError(f"no upload {upload_id!r}", field=field)
        return row

    if body.upload_id is not None:
        both = upload(body.upload_id, "upload_id")
        return (
            Side(both, body.model_a, str(body.model_a), "model_a"),
            Side(both, body.model_b, str(body.model_b), "model_b"),
        )
    up_a, up_b = upload(body.upload_a, "upload_a"), upload(body.upload_b, "upload_b")
    return (
        Side(up_a, None, body.model_a or up_a.name, "upload_a"),
        Side(up_b, None, body.model_b or up_b.name, "upload_b"),
    )
