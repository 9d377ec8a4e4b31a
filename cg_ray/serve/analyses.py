"""Run an analysis inside the service: read the uploads' texts with the encoder, then the CG metrics.

Written to a temporary directory and published atomically, so a failed or interrupted analysis never
leaves a half-written run; its status row says what happened. The metrics are CPU work: an `Offload` runs
them off the event loop — in a Ray task on the replica's node under Ray Serve (`RayTasks`: another process,
so the ingress keeps its GIL for requests), in a thread when the service runs in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.packing import pack_concepts
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.config import canonical_text_mode
from cg_ray.labels import ConceptLabels
from cg_ray.serve.db import Analysis, Store, Upload
from cg_ray.serve.encoding import Encoded, Encoder
from cg_ray.serve.redact import public_error

log = logging.getLogger(__name__)

ENCODE_CHUNK = 64  # rows per encoder call: progress granularity, and small enough to interleave with /score


def reader_texts(table: pa.Table, text: str) -> list[str]:
    prompts = table.column("prompt").to_pylist()
    responses = table.column("response").to_pylist()
    if text == "prompt":
        return [p or "" for p in prompts]
    if text == "response":
        return [r or "" for r in responses]
    return ["\n\n".join(t for t in (p, r) if t) for p, r in zip(prompts, responses, strict=True)]


def rows_table(uploads: pa.Table, encoded: list[Encoded], model: str | None, d_sae: int) -> pa.Table:
    packed = pack_concepts(encoded)
    schema = (
        S.rows_schema_with_d_sae(d_sae)
        .append(pa.field("prompt", pa.string()))
        .append(pa.field("response", pa.string()))
        .append(S.METADATA_FIELD)
    )
    # Uploads stored before metadata was kept have no such column: their rows have none.
    metadata = (
        uploads.column(S.METADATA) if S.METADATA in uploads.column_names else pa.nulls(uploads.num_rows, pa.string())
    )
    return pa.Table.from_arrays(
        [
            uploads.column("row_id"),
            uploads.column("benchmark"),
            pa.array([model] * uploads.num_rows, pa.string()),
            uploads.column("score"),
            packed.n_tokens,
            packed.concept_ids,
            packed.concept_acts,
            uploads.column("prompt"),
            uploads.column("response"),
            metadata,
        ],
        schema=schema,
    )


class Withdrawn(Exception):
    """The analysis was cancelled or deleted while its metrics were computed: nothing is published."""


def _compute_run(rows: pa.Table, labels: ConceptLabels | None, options: dict[str, Any], folder: Path) -> None:
    """The run's files (rows, metrics, descriptions) into `folder`, which the caller publishes."""
    from cg_ray.artifacts.run_dir import publish_metrics
    from cg_ray.config import MetricsConfig
    from cg_ray.describe.run import DescribeOptions, try_describe

    config = MetricsConfig.model_validate(options.get("metrics", {}))
    pq.write_table(rows, RunDir(folder).rows)
    publish_metrics(folder, config, labels, {"source": "service"})
    try_describe(folder, DescribeOptions(tokens=False))  # descriptions and themes; never fails the analysis


T = TypeVar("T")
Offload = Callable[..., Awaitable[Any]]  # `await offload(fn, *args)`: fn(*args) off the event loop


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """In a thread of this process (the service without Ray: one process, tests)."""
    return await asyncio.to_thread(fn, *args)


@functools.cache
def _remote(fn: Callable[..., Any]) -> Any:
    import ray

    return ray.remote(fn)  # exported once per function, not per call


@dataclasses.dataclass(frozen=True)
class RayTasks:
    """A Ray task per call, pinned to this replica's node (its uploads and analyses folder are local to it),
    `num_cpus` logical CPUs each. Cancelled, it cancels the task and waits (up to `stop_wait_s`) for it to stop,
    so the caller's folder is not removed under a task still writing into it."""

    num_cpus: float = 0.25
    stop_wait_s: float = 10.0

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        ref = _remote(fn).options(num_cpus=self.num_cpus, scheduling_strategy=here).remote(*args)
        try:
            result: T = await ref
            return result
        except asyncio.CancelledError:
            ray.cancel(ref)  # a KeyboardInterrupt in the task: its own `finally` blocks run
            with contextlib.suppress(Exception):  # TaskCancelledError, or the result if it won the race
                await asyncio.wait_for(_settled(ref), self.stop_wait_s)
            raise


async def _settled(ref: Any) -> None:
    await ref


async def compute_and_publish(
    offload: Offload,
    out: Path,
    wanted: Callable[[], bool],
    compute: Callable[..., object],
    *args: Any,
) -> None:
    """`compute(*args, folder)` off the event loop into a temporary folder, published as `out` only if the
    analysis is still wanted then (not cancelled or deleted meanwhile); else nothing is published."""
    with atomic_directory(out, overwrite=True) as tmp:
        await offload(compute, *args, tmp)
        if not await asyncio.to_thread(wanted):
            raise Withdrawn()


Work = Callable[[Analysis, Callable[[], bool]], Awaitable[Path]]


async def run_guarded(store: Store, analysis_id: str, work: Work) -> None:
    """The lifecycle of every in-service analysis: marked running, `work(analysis, wanted)` publishes its
    folder, marked succeeded there; withdrawn (cancelled, deleted) it publishes nothing; failed, the client
    sees the reason and never a path or traceback."""
    analysis = store.get_owned_any(Analysis, analysis_id)
    if analysis is None:
        return

    def wanted() -> bool:
        row = store.get_owned_any(Analysis, analysis_id)
        return row is not None and row.status == "running"

    try:
        store.update_analysis(analysis_id, status="running", progress=0.0, message="reading uploads", error=None)
        out = await work(analysis, wanted)
        store.update_analysis(analysis_id, status="succeeded", progress=1.0, message="done", run_dir=str(out))
    except Withdrawn:
        log.info("analysis %s was withdrawn before it was published", analysis_id)
    except Exception as exc:  # the analysis fails, the service does not
        log.exception("analysis %s failed", analysis_id)
        store.update_analysis(analysis_id, status="failed", message="failed", error=public_error(exc, analysis_id))


async def encode_in_chunks(
    store: Store, analysis_id: str, texts: list[str], encode: Callable[[int, int], Awaitable[list[Encoded]]]
) -> list[Encoded]:
    """`encode(start, stop)` over the texts in ENCODE_CHUNK steps, the progress (to 0.9) recorded after each."""
    encoded: list[Encoded] = []
    for start in range(0, len(texts), ENCODE_CHUNK):
        done = min(len(texts), start + ENCODE_CHUNK)
        encoded.extend(await encode(start, done))
        store.update_analysis(
            analysis_id, progress=0.9 * done / len(texts), message=f"read {done:,} / {len(texts):,} rows"
        )
    return encoded


def read_uploads(store: Store, analysis: Analysis) -> pa.Table:
    uploads = []
    for upload_id in analysis.upload_ids:
        upload = store.get_owned(Upload, analysis.owner, upload_id)
        uploads.append(pq.read_table(upload.path))
    return pa.concat_tables(uploads, promote_options="default")  # older uploads lack `metadata`


async def run_analysis(
    store: Store,
    encoder: Encoder,
    analysis_id: str,
    analyses_dir: Path,
    labels: ConceptLabels | None,
    offload: Offload = in_thread,
) -> None:
    async def work(analysis: Analysis, wanted: Callable[[], bool]) -> Path:
        table = await asyncio.to_thread(read_uploads, store, analysis)
        texts = reader_texts(table, canonical_text_mode(analysis.options.get("text", "prompt_response"), warn=False))
        encoded = await encode_in_chunks(
            store, analysis_id, texts, lambda start, stop: encoder.encode(texts[start:stop])
        )
        rows = rows_table(table, encoded, analysis.options.get("model"), encoder.d_sae)
        store.update_analysis(analysis_id, progress=0.9, message="computing metrics")
        out = analyses_dir / analysis_id
        await compute_and_publish(offload, out, wanted, _compute_run, rows, labels, analysis.options)
        return out

    await run_guarded(store, analysis_id, work)
