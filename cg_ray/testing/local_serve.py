"""A local Ray + Serve on 127.0.0.1 with the application deployed on an isolated data directory: ports,
tenants' keys, replica kills, and the sample texts the drivers send. Used by the load-and-fault driver
(`loadfault.py`), `benchmarks/bench_serve.py` and the end-to-end serve tests. Loopback only.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FAKE_READER = "cg_ray.testing.fakes:HashingReader.from_config"
DEFAULT_READER = "cg_ray.activations.reader:ConceptReader.from_config"
APP = "cg_ray"
SENTENCE = (
    "the model adds two numbers and carries the digit then checks the sum against the reference answer "
    "while a benchmark asks about dates units letters palindromes ordering logic and polite refusals"
)
WORDS = tuple(SENTENCE.split(" "))
TERMINAL = ("succeeded", "failed", "cancelled")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def texts(n: int, seed: int) -> list[str]:
    return [" ".join(WORDS[(seed * 7 + i * 3 + j) % len(WORDS)] for j in range(12 + (i % 9))) for i in range(n)]


def jsonl(n: int, seed: int) -> str:
    """An upload body: n scored rows."""
    return "\n".join(json.dumps({"id": i, "prompt": t, "score": i % 2}) for i, t in enumerate(texts(n, seed)))


@contextlib.contextmanager
def local_serve(tmp: Path, num_cpus: int = 2) -> Iterator[int]:
    """A local Ray with Serve's HTTP proxy on a free loopback port (yielded); both shut down on exit."""
    import ray
    from ray import serve

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # A short temp dir: Ray's socket paths have a length limit.
    ray.init(num_cpus=num_cpus, _temp_dir=str(tmp / "ray"), include_dashboard=False, log_to_driver=False)
    try:
        yield start_proxy()
    finally:
        serve.shutdown()
        ray.shutdown()


def start_proxy(tries: int = 3, **start: Any) -> int:
    """Serve's HTTP proxy on a free port, picked once Ray is up. A port is free only until someone binds it,
    and Ray's own processes take ports from the same range (a full test run once lost one between the pick
    and the proxy's bind: "Failed to bind to address"), so a lost race is retried on a new port. So is a
    proxy that Serve's controller killed before it ran (on a loaded machine it was not ready in time)."""
    from ray import serve
    from ray.exceptions import ActorDiedError

    for attempt in range(tries):
        port = free_port()
        try:
            serve.start(http_options={"host": "127.0.0.1", "port": port}, **start)  # start: serve.start's others
            return port
        except Exception as exc:
            lost_bind = "Failed to bind" in str(exc)
            proxy_killed = isinstance(exc, ActorDiedError) and "ProxyActor" in str(exc)
            if not (lost_bind or proxy_killed) or attempt == tries - 1:
                raise
            serve.shutdown()
    raise AssertionError("unreachable")


def deploy(port: int, data: Path, factory: str, max_batch: int, replicas: int, max_concurrent_analyses: int = 8) -> str:
    """Deploy the application (data under `data`, `replicas` encoder replicas); returns its base URL."""
    from ray import serve

    from cg_ray.serve.app import ServeArgs, build_app

    app = build_app(
        ServeArgs.model_validate(
            {
                "data_dir": str(data),
                "reader": {"device": "cpu"} if factory == DEFAULT_READER else {},
                "limits": {"max_concurrent_analyses": max_concurrent_analyses},
                # Two ingress replicas (the default) and the encoders must fit the 2 CPUs of local_serve, with
                # room for two analyses: explicit shares, so the drivers' figures compare across versions.
                "ingress_num_cpus": 0.25,
                "analysis_num_cpus": 0.25,
                "encoder": {
                    "reader_factory": factory,
                    "max_batch_size": max_batch,
                    "batch_wait_timeout_s": 0.01,
                    "min_replicas": replicas,
                    "max_replicas": replicas,
                    "num_cpus": 0.5,
                },
            }
        )
    )
    serve.run(app, name=APP, route_prefix="/")
    return f"http://127.0.0.1:{port}"


def tenant(data: Path, name: str) -> dict[str, str]:
    """A new API key (through the project's key API, on the deployed app's database), as request headers."""
    from cg_ray.serve.db import Store
    from cg_ray.serve.keys import create_key
    from cg_ray.serve.settings import ServiceSettings

    return {"X-API-Key": create_key(Store(ServiceSettings(data_dir=data).db_url), name)[1]}


def replica_names(deployment: str) -> list[str]:
    """The named replica actors of one deployment of the app."""
    import ray

    return sorted(
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == "serve" and "REPLICA" in a["name"] and f"{APP}#{deployment}#" in a["name"]
    )


def kill_replica(deployment: str) -> str:
    """Kill one replica of `deployment` (as a crash would); Serve's controller starts a replacement."""
    import ray

    victim = replica_names(deployment)[0]
    ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=False)
    return victim
