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
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.config import ReaderConfig
from cg_ray.activations.packing import pack_concepts
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.config import canonical_text_mode
from cg_ray.labels import ConceptLabels
from cg_ray.serve.db import Analysis, Store, Upload
from cg_ray.serve.encoding import Encoded, Encoder
from cg_ray.serve.redact import public_error
from cg_ray.serve.resources import Unschedulable, analysis_room

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


def reader_record(reader: ReaderConfig | None, encoder: Encoder, text: str) -> dict[str, Any] | None:
    """How the analysis' rows were read, as `cg-ray run` records it in manifest.json: `config` (the reader's
    ReaderConfig fields plus the text mode read) and `reader` (the factory that built it, d_sae, and the
    encoder's resolved dtype, device and SAE fingerprint as its one reader actor). None when the service does
    not know its reader settings or the encoder its factory (a test's wrapper): then no reader is claimed."""
    factory = getattr(encoder, "reader_factory", None)
    if reader is None or not factory:
        return None
    described = encoder.describe()
    actor = {
        "dtype": described.get("dtype"),
        "device": described.get("device"),
        "hardware": described.get("hardware"),
        "sae_weights": (described.get("sae") or {}).get("weights_sha256"),
    }
    return {
        "config": {**reader.model_dump(mode="json"), "text": text},
        "reader": {"factory": str(factory), "d_sae": int(encoder.d_sae), "actors": [actor]},
    }


def _write_manifest(run: RunDir, reader: dict[str, Any], metrics: dict[str, Any], n_rows: int) -> None:
    """manifest.json of the shape `cg-ray run` writes (cg_ray.pipeline.manifest), so that the run's reader is
    known to whatever re-reads its rows (`reader_of_run`: sensitivity, describe); its later steps append."""
    from cg_ray.pipeline.manifest import StageTimer, build_manifest

    doc = build_manifest(
        config={"reader": reader["config"], "metrics": metrics},
        reader=reader["reader"],
        timer=StageTimer(),
        counts={"rows": n_rows},
        extra={"source": "service"},
    )
    run.write_json(S.MANIFEST_FILE, doc, default=str)


def _compute_run(
    rows: pa.Table,
    labels: ConceptLabels | None,
    options: dict[str, Any],
    reader: dict[str, Any] | None,
    folder: Path,
) -> None:
    """The run's files (rows, metrics, descriptions; manifest.json when its reader is known, `reader_record`)
    into `folder`, which the caller publishes."""
    from cg_ray.config import MetricsConfig
    from cg_ray.describe.run import DescribeOptions, try_describe
    from cg_ray.run_outputs import publish_metrics

    config = MetricsConfig.model_validate(options.get("metrics", {}))
    run = RunDir(folder)  # the temporary folder becomes the run directory here, once
    run.write_table(S.ROWS_FILE, rows)
    if reader is not None:  # first: the steps recorded after it (describe) append to it
        _write_manifest(run, reader, config.model_dump(mode="json"), rows.num_rows)
    publish_metrics(run, config, labels, {"source": "service"})
    try_describe(run, DescribeOptions(tokens=False))  # descriptions and themes; never fails the analysis


T = TypeVar("T")
OnWait = Callable[[str | None], None]  # on_wait(why): the task waits for a CPU; on_wait(None): it started after all


class Offload(Protocol):
    """`await offload(fn, *args, on_wait=...)`: fn(*args) off the event loop."""

    def __call__(self, fn: Callable[..., T], *args: Any, on_wait: OnWait | None = None) -> Awaitable[T]: ...


async def in_thread(fn: Callable[..., T], *args: Any, on_wait: OnWait | None = None) -> T:
    """In a thread of this process (the service without Ray: one process, tests); it never waits for a CPU."""
    return await asyncio.to_thread(fn, *args)


def _started_then(fn: Callable[..., T], *args: Any) -> Iterator[T | None]:
    yield None  # "started": the task holds its CPU now
    yield fn(*args)


@functools.cache
def _remote() -> Any:
    import ray

    return ray.remote(_started_then)  # exported once, not per call


@dataclasses.dataclass(frozen=True)
class RayTasks:
    """A Ray task per call, pinned to this replica's node (its uploads and analyses folder are local to it),
    `num_cpus` logical CPUs each. Cancelled, it cancels the task and waits (up to `stop_wait_s`) for it to stop,
    so the caller's folder is not removed under a task still writing into it.

    A task that has not started within `notice_s` is reported waiting (`on_wait(message)`); one that has not
    started within `schedule_timeout_s` is cancelled and fails (Unschedulable). The task tells its start by
    yielding once (a streaming generator) before it works: the signal travels with the task's own result,
    needs no dashboard (ray.util.state does, and polls it), no actor and no database row, and cannot outlive
    the task."""

    num_cpus: float = 0.25
    schedule_timeout_s: float = 600.0
    service_cpus: float = 0.0  # what the service's replicas hold; the rest of the cluster is the analyses'
    notice_s: float = 2.0  # a worker's start (imports) takes about this long: no "waiting" before it
    stop_wait_s: float = 10.0

    async def __call__(self, fn: Callable[..., T], *args: Any, on_wait: OnWait | None = None) -> T:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        gen = _remote().options(num_cpus=self.num_cpus, scheduling_strategy=here, num_returns="streaming")
        gen = gen.remote(fn, *args)
        try:
            await self._started(gen, on_wait)
            result: T = await (await gen.__anext__())
            return result
        except Unschedulable:
            ray.cancel(gen)  # not started: dropped from the queue, nothing to wait for
            raise
        except asyncio.CancelledError:
            ray.cancel(gen)  # a KeyboardInterrupt in the task: its own `finally` blocks run
            with contextlib.suppress(Exception):  # TaskCancelledError, or the result if it won the race
                await asyncio.wait_for(_settled(gen), self.stop_wait_s)
            raise

    async def _started(self, gen: Any, on_wait: OnWait | None) -> None:
        """Until the task has started: `on_wait(message)` after `notice_s`, Unschedulable after the deadline."""
        first = asyncio.ensure_future(gen.__anext__())
        notice = min(self.notice_s, self.schedule_timeout_s)
        try:
            done, _ = await asyncio.wait({first}, timeout=notice)
            if not done:
                if on_wait is not None:
                    await asyncio.to_thread(on_wait, self._waiting_message())
                done, _ = await asyncio.wait({first}, timeout=self.schedule_timeout_s - notice)
                if not done:
                    raise Unschedulable(await asyncio.to_thread(self._timeout_reason))
                if on_wait is not None:
                    await asyncio.to_thread(on_wait, None)
        finally:
            if not first.done():
                first.cancel()  # the generator is cancelled by the caller
        from ray.exceptions import TaskUnschedulableError

        try:
            await first.result()  # the first yield (None); an error here is the task's own
        except TaskUnschedulableError:  # more CPUs than this node has at all: Ray knows at once
            raise Unschedulable(
                f"the analysis cannot run on this node: it needs {self.num_cpus:g} logical CPU "
                '(analysis_num_cpus), more than the node has; lower analysis_num_cpus or leave it "auto"'
            ) from None

    def _waiting_message(self) -> str:
        return (
            f"waiting for a CPU to run the analysis (it needs {self.num_cpus:g}, analysis_num_cpus; the cluster's "
            f"are taken); it fails if none is free within {self.schedule_timeout_s:g} s"
        )

    def _timeout_reason(self) -> str:
        import ray

        total = float(ray.cluster_resources().get("CPU", 0.0))
        free = float(ray.available_resources().get("CPU", 0.0))
        return (
            f"no CPU became free to run the analysis within {self.schedule_timeout_s:g} s "
            f"(limits.analysis_schedule_timeout_s): it needs {self.num_cpus:g} logical CPU (analysis_num_cpus) and "
            f"{free:g} of the cluster's {total:g} are free (the service's replicas hold {self.service_cpus:g}, "
            "other analyses the rest); retry when fewer analyses run, or give the analyses more room "
            "(lower ingress_num_cpus or encoder.num_cpus, or add CPUs)"
        )

    def unschedulable(self) -> str | None:
        """Why no analysis can be scheduled on the cluster as it is now (for /readyz), or None."""
        import ray

        return analysis_room(float(ray.cluster_resources().get("CPU", 0.0)), self.service_cpus, self.num_cpus)


async def _settled(gen: Any) -> None:
    async for ref in gen:
        await ref


async def compute_and_publish(
    offload: Offload,
    out: Path,
    wanted: Callable[[], bool],
    compute: Callable[..., object],
    *args: Any,
    on_wait: OnWait | None = None,
) -> None:
    """`compute(*args, folder)` off the event loop into a temporary folder, published as `out` only if the
    analysis is still wanted then (not cancelled or deleted meanwhile); else nothing is published."""
    with atomic_directory(out, overwrite=True) as tmp:
        await offload(compute, *args, tmp, on_wait=on_wait)
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
        if upload is None:  # deleted since the analysis was queued (it fails, as before, with a named cause)
            raise LookupError(f"upload {upload_id} of analysis {analysis.id} is gone")
        uploads.append(pq.read_table(upload.path))
    return pa.concat_tables(uploads, promote_options="default")  # older uploads lack `metadata`


COMPUTING = "computing metrics"


def waiting_notice(store: Store, analysis_id: str) -> OnWait:
    """The status message while the metrics' task waits for a CPU, and back once it runs."""

    def on_wait(waiting: str | None) -> None:
        row = store.get_owned_any(Analysis, analysis_id)
        if row is not None and row.status == "running":  # a cancelled one keeps its own message
            store.update_analysis(analysis_id, message=waiting or COMPUTING)

    return on_wait


async def run_analysis(
    store: Store,
    encoder: Encoder,
    analysis_id: str,
    analyses_dir: Path,
    labels: ConceptLabels | None,
    offload: Offload = in_thread,
    reader: ReaderConfig | None = None,
) -> None:
    """`reader`: the service's reader settings (`settings.reader`), recorded in the run's manifest.json with
    the encoder's factory (`reader_record`); None records no reader."""

    async def work(analysis: Analysis, wanted: Callable[[], bool]) -> Path:
        table = await asyncio.to_thread(read_uploads, store, analysis)
        text = canonical_text_mode(analysis.options.get("text", "prompt_response"), warn=False)
        texts = reader_texts(table, text)
        recorded = await asyncio.to_thread(reader_record, reader, encoder, text)
        encoded = await encode_in_chunks(
            store, analysis_id, texts, lambda start, stop: encoder.encode(texts[start:stop])
        )
        rows = rows_table(table, encoded, analysis.options.get("model"), encoder.d_sae)
        store.update_analysis(analysis_id, progress=0.9, message=COMPUTING)
        out = analyses_dir / analysis_id
        await compute_and_publish(
            offload,
            out,
            wanted,
            _compute_run,
            rows,
            labels,
            analysis.options,
            recorded,
            on_wait=waiting_notice(store, analysis_id),
        )
        return out

    await run_guarded(store, analysis_id, work)
