"""Ray Serve application: `serve run serve_config.yaml` (import_path: cg_ray.serve.app:build_app).

Two deployments: the encoder (reader + SAE, `@serve.batch`, GPUs and autoscaling from the args) and the
FastAPI ingress (two replicas by default), which holds a handle to the encoder and the SQL store; the
replicas share the store and claim in-service analyses through its leases. Their CPU shares, and the
analyses', are sized to the cluster at build time (serve/resources.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from ray import serve
from ray.serve import Application
from ray.serve.handle import DeploymentHandle

from cg_ray.activations.config import DEFAULT_READER_FACTORY, ReaderConfig
from cg_ray.activations.packing import SparseRow, sparse_rows
from cg_ray.config import base_settings
from cg_ray.errors import ConfigError
from cg_ray.serve.encoding import Encoded, SpanOptions
from cg_ray.serve.resources import AUTO, CpuShare, Shape, Shares, measured_cpus, resolve_shares
from cg_ray.serve.settings import ServiceSettings

log = logging.getLogger(__name__)


class EncoderOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    num_cpus: CpuShare = Field(AUTO, description='logical CPUs of one replica; "auto": sized to the cluster')
    num_gpus: float = Field(0, ge=0)
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(2, ge=1)
    target_ongoing_requests: float = Field(4, gt=0)
    upscale_delay_s: float = Field(30.0, ge=0, description="load must persist this long before a replica is added")
    downscale_delay_s: float = Field(600.0, ge=0, description="idle this long before a replica is removed")
    look_back_period_s: float = Field(30.0, gt=0, description="window the ongoing requests are averaged over")
    max_batch_size: int = Field(64, ge=1, description="rows per forward pass across concurrent requests")
    batch_wait_timeout_s: float = Field(0.02, ge=0)
    reader_factory: str = Field(DEFAULT_READER_FACTORY, description='"module:attr" building the reader')


class ServeArgs(ServiceSettings):
    """The `args:` of serve_config.yaml: service settings plus the encoder deployment's options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    encoder: EncoderOptions = EncoderOptions()
    # Ray Serve admits 5 concurrent requests per replica by default: with small requests from many
    # clients the ingress then starves the encoder's batches (measured: 5 rows/s with 64 clients).
    ingress_max_ongoing_requests: int = Field(256, ge=1, description="concurrent requests one ingress replica takes")
    # Two by default: a crashed ingress replica is then no outage (the other answers while it restarts);
    # analyses are claimed through the store's leases, so exactly one replica runs each (serve/leases.py).
    ingress_replicas: int = Field(2, ge=1, description="ingress replicas (several share the store; see leases.py)")
    # "auto" (resources.py): half a CPU each where the cluster has room, less on a small one, so that the
    # replicas never take the CPUs the analyses need (on 2 CPUs they once did, and analyses waited forever).
    ingress_num_cpus: CpuShare = Field(
        AUTO, description='logical CPUs of one ingress replica (0: it fits on a 0-CPU head; "auto": sized)'
    )
    # An analysis' metrics run in a Ray task on the ingress replica's node, not in the replica: in its
    # threads they competed with the requests for the GIL (status reads took seconds under load).
    analysis_num_cpus: CpuShare = Field(AUTO, description="logical CPUs of one analysis' metrics task")
    cluster_cpus: float | None = Field(
        None,
        gt=0,
        description="CPUs the auto shares are sized for; None: the cluster's, measured at build "
        "time (set it on an autoscaling cluster, whose CPUs at build time are not its full size)",
    )


@serve.deployment(name="encoder")
class EncoderDeployment:
    """The reader behind a Serve handle. Rows go back as `SparseRow`s: numpy arrays and a count, so the
    ingress unpickles them without the reader's (torch) modules."""

    def __init__(self, reader_config: ReaderConfig, factory: str, max_batch_size: int, wait_s: float) -> None:
        from cg_ray.pipeline.reader_stage import reader_from_config

        self.reader = reader_from_config(reader_config, factory)
        self.factory = factory
        # serve.batch wraps the method in a queue object that takes its limits at run time.
        batcher: Any = self.encode_batch
        batcher.set_max_batch_size(max_batch_size)
        batcher.set_batch_wait_timeout_s(wait_s)

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.02)
    async def encode_batch(self, requests: list[list[str]]) -> list[list[SparseRow]]:
        # Concurrent requests share one forward pass; each gets its own rows back.
        flat = [text for texts in requests for text in texts]
        rows = sparse_rows(self.reader.read(flat))
        out, start = [], 0
        for texts in requests:
            out.append(rows[start : start + len(texts)])
            start += len(texts)
        return out

    async def encode(self, texts: list[str]) -> list[SparseRow]:
        # serve.batch turns one request's call into one element of a batch: this call gets its own list.
        rows: list[SparseRow] = await self.encode_batch(texts)
        return rows

    def encode_spans(self, texts: list[str], count_from: list[int], options: SpanOptions) -> list[SparseRow]:
        """Span readings (diff-models) are not batched with /score's: one call reads its own texts."""
        return sparse_rows(self.reader.read(texts, count_from=count_from, **options))

    def info(self) -> dict[str, Any]:
        return {"d_sae": int(self.reader.d_sae), "describe": self.reader.describe(), "factory": self.factory}


class RemoteEncoder:
    """The service's Encoder interface over the encoder deployment's handle."""

    RETRIES = 5  # a replica that dies mid-request (crash, scale-down) is retried, on another or its restart
    BACKOFF_S = 0.5

    def __init__(self, handle: DeploymentHandle, info: dict[str, Any]) -> None:
        self.handle = handle
        self.d_sae = int(info["d_sae"])
        self._describe = info["describe"]
        factory = info.get("factory")  # the deployment's EncoderOptions.reader_factory; analyses record it
        self.reader_factory = None if factory is None else str(factory)

    async def encode(self, texts: Sequence[str]) -> list[Encoded]:
        return await self._call("encode", list(texts))

    async def encode_spans(
        self, texts: Sequence[str], count_from: Sequence[int], options: SpanOptions
    ) -> list[Encoded]:
        return await self._call("encode_spans", list(texts), list(count_from), SpanOptions(**options))

    async def _call(self, method: str, *args: Any) -> list[Encoded]:
        import asyncio

        from ray.exceptions import RayActorError
        from ray.serve.exceptions import DeploymentUnavailableError, ReplicaUnavailableError

        retryable = (RayActorError, ReplicaUnavailableError, DeploymentUnavailableError)
        for attempt in range(self.RETRIES):
            try:
                rows: list[SparseRow] = await getattr(self.handle, method).remote(*args)
                return list(rows)
            except retryable as exc:
                if attempt == self.RETRIES - 1:
                    raise
                log.warning(
                    "encoder replica unavailable (%s); retry %d/%d", type(exc).__name__, attempt + 1, self.RETRIES
                )
                await asyncio.sleep(self.BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    def describe(self) -> dict[str, Any]:
        return dict(self._describe)


@serve.deployment(name="ingress")
@serve.ingress()
class Ingress:
    async def __init__(  # type: ignore[misc]
        self, settings: ServiceSettings, encoder: DeploymentHandle, shares: Shares
    ) -> None:
        self.settings = settings
        self.shares = shares
        info = await encoder.info.remote()
        self.encoder = RemoteEncoder(encoder, info)
        self.reader_factory = str(info.get("factory", ""))

    def __serve_build_asgi_app__(self) -> Any:
        from cg_ray.activations.saes.labels import shipped_labels
        from cg_ray.labels import load_labels
        from cg_ray.serve.api import create_api
        from cg_ray.serve.db import Store

        # Without a labels file, the labels that ship with the reader's SAE (the default's): an upload's
        # concepts then read as words, not "(no label)".
        labels = (
            load_labels(self.settings.labels, d_sae=self.encoder.d_sae)
            if self.settings.labels
            else shipped_labels(self.settings.reader.sae, self.encoder.d_sae, self.reader_factory)
        )
        from cg_ray.serve.leases import LeaseKeeper, replica_name

        store = Store(self.settings.db_url)
        app = create_api(self.settings, store, self.encoder, labels)
        # Leases name the Serve replica that holds them (its id ends the replica actor's name), so a record
        # of who ran what can be read against the replicas that were killed.
        app.state.service.leases = LeaseKeeper(store, name=replica_name(serve.get_replica_context().replica_tag))
        from cg_ray.serve.analyses import RayTasks

        app.state.service.offload = RayTasks(
            num_cpus=self.shares.analysis,
            schedule_timeout_s=self.settings.limits.analysis_schedule_timeout_s,
            service_cpus=self.shares.service_cpus,
        )
        return app


def parse_serve_args(args: ServeArgs | Mapping[str, Any]) -> ServeArgs:
    if isinstance(args, ServeArgs):
        return args
    try:
        return ServeArgs.model_validate(args)
    except ValidationError as exc:
        raise ConfigError(f"serve_config.yaml args: {exc}") from None


def service_settings(args: ServeArgs) -> ServiceSettings:
    """The service's own settings of the args (the deployments' options dropped): the ingress replicas get
    the typed settings, not a dump to re-parse."""
    return base_settings(args, ServiceSettings)


def cpu_shares(args: ServeArgs) -> Shares:
    """The parts' CPU shares on the cluster the app is built on (Serve builds it in a task on the cluster),
    refused (ConfigError) when the replicas leave no CPU for one analysis."""
    shape = Shape(
        ingress_replicas=args.ingress_replicas,
        ingress_num_cpus=args.ingress_num_cpus,
        encoder_replicas=args.encoder.min_replicas,
        encoder_num_cpus=args.encoder.num_cpus,
        analysis_num_cpus=args.analysis_num_cpus,
        analyses=args.limits.max_concurrent_analyses,
    )
    shares = resolve_shares(shape, args.cluster_cpus or measured_cpus())
    log.info("%s", shares.describe())
    return shares


def build_app(args: ServeArgs) -> Application:
    """The application of `serve run serve_config.yaml`. Ray Serve validates the `args:` into the annotated
    model before calling (its typed-builder pattern); scripts and tests may pass the plain mapping."""
    parsed = parse_serve_args(args)
    enc = parsed.encoder
    if enc.min_replicas > enc.max_replicas:
        raise ConfigError(f"encoder.min_replicas ({enc.min_replicas}) > max_replicas ({enc.max_replicas})")
    shares = cpu_shares(parsed)
    encoder = EncoderDeployment.options(  # type: ignore[attr-defined]
        ray_actor_options={"num_cpus": shares.encoder, "num_gpus": enc.num_gpus},
        autoscaling_config={
            "min_replicas": enc.min_replicas,
            "max_replicas": enc.max_replicas,
            "target_ongoing_requests": enc.target_ongoing_requests,
            "upscale_delay_s": enc.upscale_delay_s,
            "downscale_delay_s": enc.downscale_delay_s,
            "look_back_period_s": enc.look_back_period_s,
        },
        max_ongoing_requests=max(8, enc.max_batch_size),
    ).bind(parsed.reader, enc.reader_factory, enc.max_batch_size, enc.batch_wait_timeout_s)
    ingress = Ingress.options(  # type: ignore[attr-defined]
        max_ongoing_requests=parsed.ingress_max_ongoing_requests,
        num_replicas=parsed.ingress_replicas,
        ray_actor_options={"num_cpus": shares.ingress},
    )
    app: Application = ingress.bind(service_settings(parsed), encoder, shares)
    return app
