"""What a run asks of its Ray cluster, fitted to the cluster it got: checked once, at start.

A run holds actor pools for the whole of its streaming execution: the generation engine (and, for vLLM,
its chat-template, tokenize and detokenize actors), the judge's engine where rows are scored by `judge`
(the judge pass streams behind the generation, so both engines run at once), then the reader pool; Ray
Data's map tasks (splitting, scoring, composing the reader's text) need a CPU beside them. If the pools
take every CPU the tasks never start and the job waits forever without a word. So the plan adds it all
up, refuses a cluster that cannot host the smallest pools (naming what is missing), and clamps each
pool's `max_actors` to what fits. Memory is counted where the run reserves it (the light vLLM stages'
`LIGHT_STAGE_MEMORY` each, and a pool's `resources.memory_gib`), so that a cluster without it is refused
instead of leaving the actors pending. Explicit per-actor values (`num_cpus`, `num_gpus`, `min_actors`)
are kept; a pool is never grown past its configured `max_actors`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from cg_ray.errors import ConfigError
from cg_ray.generation.config import GenerationConfig, StageResources
from cg_ray.generation.vllm import LIGHT_STAGE_CPUS, LIGHT_STAGE_MEMORY, LIGHT_STAGES, engine_bundle
from cg_ray.pipeline.config import RunConfig

# Ray Data gives a map task 1 CPU unless told otherwise, and several maps of the graph (the generation
# split, scoring) keep that default: one must fit beside the actors for the pipeline to move.
TASK_CPUS = 1.0
_EPS = 1e-9


@dataclass(frozen=True)
class Cluster:
    """The CPUs and GPUs a job can count on: what the cluster has, or what its autoscaler may add."""

    cpus: float
    gpus: float
    largest_node_cpus: float
    largest_node_gpus: float
    autoscaled: bool = False
    memory: float = float("inf")  # bytes of Ray's `memory` resource (heap reservations), all nodes
    largest_node_memory: float = float("inf")

    @classmethod
    def of_ray(cls) -> Cluster:
        """The connected cluster's alive nodes, or its autoscaler's maximum where that is larger."""
        import ray

        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        cpus = sum(float(n.get("CPU", 0)) for n in nodes)
        gpus = sum(float(n.get("GPU", 0)) for n in nodes)
        node_cpus = max((float(n.get("CPU", 0)) for n in nodes), default=0.0)
        node_gpus = max((float(n.get("GPU", 0)) for n in nodes), default=0.0)
        memory = sum(float(n.get("memory", 0)) for n in nodes)
        node_memory = max((float(n.get("memory", 0)) for n in nodes), default=0.0)
        most = _autoscaler_max()
        if most and (most.get("CPU", 0) > cpus or most.get("GPU", 0) > gpus):
            # Worker types of unknown size may come up: only the totals are checked then (memory only where
            # the autoscaler publishes it).
            most_memory = max(memory, most["memory"]) if "memory" in most else float("inf")
            inf = float("inf")
            return cls(max(cpus, most.get("CPU", 0)), max(gpus, most.get("GPU", 0)), inf, inf, True, most_memory)
        if most is None and (cpus == 0 or legacy_autoscaler(_legacy_status())):
            # An autoscaler whose maximum Ray does not publish (the v1 monitor), or a head kept free of work
            # that can only mean workers will join: nothing is refused, the pools keep their configured sizes.
            return cls(float("inf"), float("inf"), float("inf"), float("inf"), True)
        return cls(cpus, gpus, node_cpus, node_gpus, memory=memory, largest_node_memory=node_memory)


def _legacy_status() -> dict[str, Any] | None:
    try:  # private, as above: the v1 monitor's status, which `ray status` prints
        import json

        import ray._private.ray_constants as ray_constants
        from ray.experimental.internal_kv import _internal_kv_get

        raw = _internal_kv_get(ray_constants.DEBUG_AUTOSCALING_STATUS)
        status: dict[str, Any] = json.loads(raw) if raw else {}
    except Exception:
        return None
    return status


def legacy_autoscaler(status: dict[str, Any] | None) -> bool:
    """Whether the v1 monitor runs an autoscaling config: its report names node types (`head_cpu`,
    `gpu_worker`, …); without a config every node is its own type, named `node_<id>`."""
    report = (status or {}).get("autoscaler_report") or {}
    types = set(report.get("active_nodes") or {}) | set((report.get("node_type_mapping") or {}).values())
    return any(not t.startswith("node_") for t in types)


def _autoscaler_max() -> dict[str, float] | None:
    try:  # a private Ray API (what Ray Data's own shuffle sizing reads); absent or failing: no autoscaler
        from ray._private.state import state

        most = state.get_max_resources_from_cluster_config()
    except Exception:
        return None
    return {k: float(v) for k, v in most.items()} if most else None


@dataclass(frozen=True)
class Pool:
    """One actor pool as the config asks for it: per-actor CPUs/GPUs (light vLLM stages apart)."""

    name: str
    key: str  # the config key of its resources, for messages
    cpus: float
    gpus: float
    light_cpus: float  # the chat-template, tokenize and detokenize actors that scale with a vLLM engine
    min_actors: int
    max_actors: int
    workers: int = 1  # processes an actor spreads over (a tensor-parallel vLLM engine: one per GPU)
    light_memory: float = 0.0  # bytes its light vLLM stages reserve, per engine actor
    memory: float = 0.0  # bytes one actor reserves (`resources.memory_gib`)

    @property
    def memory_per_actor(self) -> float:
        return self.memory + self.light_memory

    @property
    def cpus_per_actor(self) -> float:
        return self.cpus + self.light_cpus


@dataclass(frozen=True)
class FitPlan:
    """The pools' sizes on this cluster; `apply` gives the run config they become."""

    cluster: Cluster
    engine: Pool | None
    reader: Pool
    engine_actors: int  # the engine pool's max_actors on this cluster (0: no engine actors)
    reader_actors: int
    needs_cpus: float  # at the pools' smallest sizes, Ray Data's task included
    judge: Pool | None = None  # the judge's engine, where the suite has rows scored by `judge`
    judge_actors: int = 0

    @property
    def reserved_memory(self) -> float:
        """Bytes the pools reserve at their sizes on this cluster."""
        pools = ((self.engine, self.engine_actors), (self.judge, self.judge_actors), (self.reader, self.reader_actors))
        return sum(p.memory_per_actor * n for p, n in pools if p is not None)

    def apply(self, config: RunConfig) -> RunConfig:
        update: dict[str, Any] = {"reader": _with_max(config.reader, self.reader_actors)}
        if self.engine is not None:
            update["generation"] = _with_max(config.generation, self.engine_actors)
        if self.judge is not None:
            update["judge"] = _with_max(config.judge_config(), self.judge_actors)
        return config.model_copy(update=update)

    def as_dict(self) -> dict[str, Any]:
        """For the manifest: what the cluster had and what the run took of it."""
        return {
            # None: an autoscaler whose maximum is unknown (JSON has no infinity)
            "cluster_cpus": self.cluster.cpus if math.isfinite(self.cluster.cpus) else None,
            "cluster_gpus": self.cluster.gpus if math.isfinite(self.cluster.gpus) else None,
            "autoscaled": self.cluster.autoscaled,
            "needs_cpus": round(self.needs_cpus, 3),
            "cluster_memory_gib": round(self.cluster.memory / 2**30, 2) if math.isfinite(self.cluster.memory) else None,
            "reserved_memory_gib": round(self.reserved_memory / 2**30, 2),
            "engine_actors": self.engine_actors,
            "engine_cpus_per_actor": self.engine.cpus_per_actor if self.engine else 0.0,
            "judge_actors": self.judge_actors,
            "reader_actors": self.reader_actors,
            "reader_cpus_per_actor": self.reader.cpus,
            "task_cpus": TASK_CPUS,
        }


def _with_max(config: Any, max_actors: int) -> Any:
    resources: StageResources = config.resources
    return config.model_copy(update={"resources": resources.model_copy(update={"max_actors": max_actors})})


def _engine(config: GenerationConfig, key: str) -> Pool | None:
    """The generation backend's actor pool, or None where it runs as Ray Data tasks (fake)."""
    res = config.resources
    if config.backend == "vllm":
        bundle = engine_bundle(config)
        light = LIGHT_STAGES * LIGHT_STAGE_CPUS
        workers = config.engine.tensor_parallel_size if config.on_gpu else 1
        gpus = bundle.get("GPU", 0.0)
        light_memory = LIGHT_STAGES * LIGHT_STAGE_MEMORY
        return Pool("engine", key, bundle["CPU"], gpus, light, res.min_actors, res.max_actors, workers, light_memory,
                    res.memory_ask or 0.0)  # fmt: skip
    if config.backend == "hf":
        return Pool("engine", key, res.num_cpus, res.num_gpus, 0.0, res.min_actors, res.max_actors,
                    memory=res.memory_ask or 0.0)  # fmt: skip
    return None


def _judge(config: RunConfig) -> Pool | None:
    """The judge's engine where a source is scored by `judge`. The judge pass streams behind the generation
    (nothing is materialized between them), so its pool holds resources beside the generation's."""
    if not any(source.scorer == "judge" for source in config.benchmarks):
        return None
    pool = _engine(config.judge_config(), "judge" if config.judge is not None else "generation")
    return None if pool is None else replace(pool, name="judge engine")


def fit(config: RunConfig, cluster: Cluster) -> FitPlan:
    """The plan for `config` on `cluster`; ConfigError naming what is missing when it cannot be hosted."""
    reader = _reader(config.reader.resources)
    engine, judge = _engine(config.generation, "generation"), _judge(config)
    counts, needs = _size([p for p in (engine, judge, reader) if p is not None], cluster)
    return FitPlan(
        cluster, engine, reader, counts.get("engine", 0), counts["reader"], needs, judge, counts.get("judge engine", 0)
    )


def fit_reader_pool(resources: StageResources, cluster: Cluster) -> StageResources:
    """A reader pool alone (jobs that only read, `cg_ray.pipeline.reading`): refused or clamped the same way."""
    counts, _ = _size([_reader(resources)], cluster)
    return resources.model_copy(update={"max_actors": counts["reader"]})


def _reader(res: StageResources) -> Pool:
    return Pool("reader", "reader", res.num_cpus, res.num_gpus, 0.0, res.min_actors, res.max_actors,
                memory=res.memory_ask or 0.0)  # fmt: skip


def _size(pools: list[Pool], cluster: Cluster) -> tuple[dict[str, int], float]:
    """Each pool's actors on `cluster`, and the CPUs needed at the smallest sizes (refused if over)."""
    _check_nodes(pools, cluster)
    counts = {p.name: p.min_actors for p in pools}
    used = _Use(
        TASK_CPUS + sum(p.cpus_per_actor * counts[p.name] for p in pools),
        sum(p.gpus * counts[p.name] for p in pools),
        sum(p.memory_per_actor * counts[p.name] for p in pools),
    )
    if not used.fits(cluster):
        raise ConfigError(_refusal(pools, cluster, used))
    needs = used.cpus
    grown = True
    while grown:  # one actor at a time, pool by pool, while the cluster has room and the config allows
        grown = False
        for p in pools:
            more = _Use(used.cpus + p.cpus_per_actor, used.gpus + p.gpus, used.memory + p.memory_per_actor)
            if counts[p.name] < p.max_actors and more.fits(cluster):
                counts[p.name] += 1
                used = more
                grown = True
    return counts, needs


@dataclass(frozen=True)
class _Use:
    """What pools of some sizes take: CPUs (Ray Data's task included), GPUs, reserved memory bytes."""

    cpus: float
    gpus: float
    memory: float

    def fits(self, cluster: Cluster) -> bool:
        return (
            self.cpus <= cluster.cpus + _EPS
            and self.gpus <= cluster.gpus + _EPS
            and self.memory <= cluster.memory * (1 + _EPS)
        )


def _check_nodes(pools: list[Pool], cluster: Cluster) -> None:
    for p in pools:
        if p.memory > cluster.largest_node_memory * (1 + _EPS):  # one actor's ask is one node's, whole
            raise ConfigError(
                f"one {p.name} actor reserves {_gib(p.memory)} GiB of memory, but the largest node offers Ray "
                f"{_gib(cluster.largest_node_memory)} GiB; lower {p.key}.resources.memory_gib or add a larger node"
            )
        cpus, gpus = p.cpus / p.workers, p.gpus / p.workers
        if cpus > cluster.largest_node_cpus + _EPS or gpus > cluster.largest_node_gpus + _EPS:
            raise ConfigError(
                f"one {p.name} actor needs {_n(cpus)} CPUs and {_n(gpus)} GPUs on one node, but the largest node "
                f"has {_n(cluster.largest_node_cpus)} CPUs and {_n(cluster.largest_node_gpus)} GPUs; lower "
                f"{p.key}.resources.num_cpus / num_gpus or add a larger node"
            )


def _refusal(pools: list[Pool], cluster: Cluster, used: _Use) -> str:
    def times(p: Pool) -> str:
        return f"{p.min_actors} × " if p.min_actors > 1 else ""

    fewer = " or min_actors" if any(p.min_actors > 1 for p in pools) else ""
    problems = []
    cpus, gpus = used.cpus, used.gpus
    if cpus > cluster.cpus + _EPS:
        parts = []
        for p in pools:
            parts.append(f"{p.name} {times(p)}{_n(p.cpus)}")
            if p.light_cpus:
                parts.append(f"light vLLM stages {times(p)}{_n(p.light_cpus)}")
        parts.append(f"Ray Data tasks {_n(TASK_CPUS)}")
        keys = " / ".join(dict.fromkeys(f"{p.key}.resources.num_cpus" for p in pools))
        problems.append(
            f"the job needs {_n(cpus)} CPUs ({', '.join(parts)}) but the cluster has {_n(cluster.cpus)}; "
            f"add CPUs or lower {keys}{fewer}"
        )
    if gpus > cluster.gpus + _EPS:
        users = [p for p in pools if p.gpus]
        parts = [f"{p.name} {times(p)}{_n(p.gpus)}" for p in users]
        keys = " / ".join(dict.fromkeys(f"{p.key}.resources.num_gpus" for p in users))
        problems.append(
            f"the job needs {_n(gpus)} GPUs ({', '.join(parts)}) but the cluster has {_n(cluster.gpus)}; "
            f"add GPUs or lower {keys}{fewer}"
        )
    if used.memory > cluster.memory * (1 + _EPS):
        problems.append(_memory_problem(pools, cluster, used.memory))
    return "; and ".join(problems)


def _memory_problem(pools: list[Pool], cluster: Cluster, memory: float) -> str:
    parts, keys = [], []
    for p in pools:
        times = f"{p.min_actors} × " if p.min_actors > 1 else ""
        if p.memory:
            parts.append(f"{p.name} {times}{_gib(p.memory)}")
            keys.append(f"{p.key}.resources.memory_gib")
        if p.light_memory:
            parts.append(f"light vLLM stages {times}{LIGHT_STAGES} × {_gib(LIGHT_STAGE_MEMORY)}")
        if p.memory_per_actor and p.min_actors > 1:
            keys.append(f"{p.key}.resources.min_actors")
    lower = f" or lower {' / '.join(dict.fromkeys(keys))}" if keys else ""
    return (
        f"the job reserves {_gib(memory)} GiB of memory ({', '.join(parts)}) but the cluster offers Ray "
        f"{_gib(cluster.memory)} GiB; add memory (nodes, or `ray start --memory`){lower}"
    )


def _n(x: float) -> str:
    return f"{round(x, 3):g}"


def _gib(x: float) -> str:
    return f"{x / 2**30:.2f}"


__all__ = ["TASK_CPUS", "Cluster", "FitPlan", "Pool", "fit", "fit_reader_pool"]
