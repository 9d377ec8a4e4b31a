"""Load and fault test of the REST service on Ray Serve, on 127.0.0.1 only.

1. Load: C concurrent clients, each sending `POST /v1/score` requests of R rows one after another
   (bounded: N requests in all), against the encoder deployment with `@serve.batch` off (max_batch_size=1)
   and on (64), in the same run. Default: 64 clients, 1-row requests — the case batching is for (a
   16-row request already fills a CPU forward pass). Reports p50 / p99 latency, throughput (rows/s) and
   errors per mode.
2. Fault: with two encoder replicas, start an analysis and a score load, kill one encoder replica
   mid-way; the analysis must succeed with exactly the results of an undisturbed analysis of the same
   upload, and requests must recover (errors are counted).
The speedup of batched over unbatched encoding is printed last.

    .venv/bin/python benchmarks/bench_serve.py [--clients 64] [--requests 512] [--rows 1] [--reader default|fake]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ANALYSIS_ROWS = 3000  # long enough that the replica is killed while the analysis is still reading
FAKE = "cg_ray.fakes:HashingReader.from_config"
DEFAULT = "cg_ray.activations.reader:ConceptReader.from_config"
SENTENCE = (
    "the model adds two numbers and carries the digit then checks the sum against the reference answer "
    "while a benchmark asks about dates units letters palindromes ordering logic and polite refusals"
)
WORDS = tuple(SENTENCE.split(" "))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def texts(n: int, seed: int) -> list[str]:
    return [" ".join(WORDS[(seed * 7 + i * 3 + j) % len(WORDS)] for j in range(12 + (i % 9))) for i in range(n)]


def deploy(port: int, data: Path, factory: str, max_batch: int, replicas: int) -> tuple[str, dict[str, str]]:
    from ray import serve

    from cg_ray.serve.app import build_app
    from cg_ray.serve.db import Store
    from cg_ray.serve.keys import create_key
    from cg_ray.serve.settings import ServiceSettings

    app = build_app(
        {
            "data_dir": str(data),
            "reader": {"device": "cpu"} if factory == DEFAULT else {},
            "limits": {"max_concurrent_analyses": 8},
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
    serve.run(app, name="cg_ray", route_prefix="/")
    key = create_key(Store(ServiceSettings(data_dir=data).db_url), "bench")[1]
    return f"http://127.0.0.1:{port}", {"X-API-Key": key}


async def load(base: str, headers: dict[str, str], n: int, rows: int, clients: int | None = None) -> dict[str, Any]:
    """n requests of `rows` rows from `clients` concurrent clients (default: all n at once)."""
    clients = min(clients or n, n)
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=600, limits=limits) as client:

        async def one(i: int) -> None:
            nonlocal errors
            t0 = time.perf_counter()
            try:
                r = await client.post("/v1/score", json={"texts": texts(rows, i)})
                if r.status_code != 200:
                    errors += 1
                    return
            except httpx.HTTPError:
                errors += 1
                return
            latencies.append(time.perf_counter() - t0)

        async def client_loop(c: int) -> None:
            for i in range(c, n, clients):  # each client sends its next request when the last returns
                await one(i)

        t0 = time.perf_counter()
        await asyncio.gather(*(client_loop(c) for c in range(clients)))
        wall = time.perf_counter() - t0
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return {
        "ok": len(latencies),
        "errors": errors,
        "p50_s": q[49],
        "p99_s": q[98],
        "wall_s": wall,
        "rows_per_s": len(latencies) * rows / wall,
    }


def analysis(client: httpx.Client, headers: dict[str, str], upload_id: str) -> dict[str, Any]:
    a = client.post("/v1/analyses", headers=headers, json={"upload_ids": [upload_id]}).json()
    while a["status"] in ("queued", "running"):
        time.sleep(0.5)
        a = client.get(f"/v1/analyses/{a['id']}", headers=headers).json()
    return a


def fault_test(base: str, headers: dict[str, str], rows: int) -> dict[str, Any]:
    import ray

    body = "\n".join(json.dumps({"id": i, "prompt": t, "score": i % 2}) for i, t in enumerate(texts(ANALYSIS_ROWS, 1)))
    with httpx.Client(base_url=base, timeout=600) as client:
        up = client.post("/v1/uploads", headers=headers, files={"file": ("f.jsonl", body, "application/jsonl")}).json()
        clean = analysis(client, headers, up["id"])
        reference = client.get(f"/v1/analyses/{clean['id']}/artifacts/concepts.csv", headers=headers).text
        started = client.post("/v1/analyses", headers=headers, json={"upload_ids": [up["id"]]}).json()

        status_at_kill: dict[str, str] = {}

        async def load_and_kill() -> dict[str, Any]:
            task = asyncio.create_task(load(base, headers, 40, rows))
            await asyncio.sleep(1.0)
            status_at_kill["analysis"] = client.get(f"/v1/analyses/{started['id']}", headers=headers).json()["status"]
            named = ray.util.list_named_actors(all_namespaces=True)
            replicas = [
                a for a in named if a["namespace"] == "serve" and "encoder" in a["name"] and "REPLICA" in a["name"]
            ]
            victim = replicas[0]
            ray.kill(ray.get_actor(victim["name"], namespace="serve"), no_restart=False)
            return await task

        during = asyncio.run(load_and_kill())
        a = started
        while a["status"] in ("queued", "running"):
            time.sleep(0.5)
            a = client.get(f"/v1/analyses/{a['id']}", headers=headers).json()
        after = (
            client.get(f"/v1/analyses/{a['id']}/artifacts/concepts.csv", headers=headers).text
            if a["status"] == "succeeded"
            else ""
        )
    return {
        "analysis_status_at_kill": status_at_kill.get("analysis"),
        "analysis_status": a["status"],
        "analysis_identical_to_undisturbed": after == reference,
        "score_requests_during_fault": during,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=512, help="requests per mode, in all")
    ap.add_argument("--clients", type=int, default=64, help="concurrent clients")
    ap.add_argument("--rows", type=int, default=1, help="rows per request")
    ap.add_argument("--skip-fault", action="store_true", help="only the load comparison")
    ap.add_argument("--reader", choices=["default", "fake"], default="default")
    args = ap.parse_args()
    factory = DEFAULT if args.reader == "default" else FAKE
    from cg_ray.hardware import hardware_info, resolve_dtype

    print(f"hardware: {hardware_info().line()}; reader dtype auto = {resolve_dtype('auto', 'cpu')}")

    import ray
    from ray import serve

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tmp = Path(tempfile.mkdtemp(prefix="cgb", dir="/tmp"))
    port = free_port()
    results: dict[str, Any] = {}
    try:
        ray.init(num_cpus=2, _temp_dir=str(tmp / "ray"), include_dashboard=False, log_to_driver=False)
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        for mode, batch in (("unbatched", 1), ("batched", 64)):
            base, headers = deploy(port, tmp / mode, factory, batch, replicas=1)
            asyncio.run(load(base, headers, args.clients, args.rows))  # warm-up
            results[mode] = asyncio.run(load(base, headers, args.requests, args.rows, args.clients))
            serve.delete("cg_ray")
            r = results[mode]
            print(
                f"{mode:>9}: {r['ok']} ok, {r['errors']} errors; p50 {r['p50_s']:.2f} s, p99 {r['p99_s']:.2f} s; "
                f"{r['rows_per_s']:.0f} rows/s ({args.requests} requests × {args.rows} rows, {args.clients} clients)"
            )
        if not args.skip_fault:
            fault(port, tmp, factory, args, results)
    finally:
        serve.shutdown()
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    speedup = results["batched"]["rows_per_s"] / results["unbatched"]["rows_per_s"]
    print(f"speedup of @serve.batch over unbatched encoding: {speedup:.2f}x")


def fault(port: int, tmp: Path, factory: str, args: argparse.Namespace, results: dict[str, Any]) -> None:
    base, headers = deploy(port, tmp / "fault", factory, 64, replicas=2)
    results["fault"] = fault_test(base, headers, args.rows)
    f = results["fault"]
    d = f["score_requests_during_fault"]
    print(
        f"fault: killed 1 of 2 encoder replicas under load (analysis {f['analysis_status_at_kill']} at the kill); "
        f"analysis {f['analysis_status']}, identical to an "
        f"undisturbed one: {f['analysis_identical_to_undisturbed']}; score requests during the fault: "
        f"{d['ok']} ok, {d['errors']} errors"
    )


if __name__ == "__main__":
    main()
