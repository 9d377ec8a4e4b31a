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
3. `--load-fault` (instead of 1 and 2): the load-and-fault run of tests/serve/test_load_fault.py — a mixed
   load (uploads, analyses, reads, /v1/score) from three tenants while an encoder replica and the ingress
   are killed — with its figures: requests and status codes by kind, p50 / p99, the restart window, the
   analyses' outcomes.

    .venv/bin/python benchmarks/bench_serve.py [--clients 64] [--requests 512] [--rows 1] [--reader default|fake]
    .venv/bin/python benchmarks/bench_serve.py --load-fault [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from cg_ray.testing import loadfault as lf
from cg_ray.testing.loadfault import texts

ANALYSIS_ROWS = 3000  # long enough that the replica is killed while the analysis is still reading


def deploy(port: int, data: Path, factory: str, max_batch: int, replicas: int) -> tuple[str, dict[str, str]]:
    return lf.deploy(port, data, factory, max_batch, replicas), lf.tenant(data, "bench")


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
    body = lf.jsonl(ANALYSIS_ROWS, 1)
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
            await asyncio.to_thread(lf.kill_replica, "encoder")
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
    ap.add_argument("--requests", type=int, help="requests per mode, in all (default 512; --load-fault: 200)")
    ap.add_argument("--clients", type=int, default=64, help="concurrent clients")
    ap.add_argument("--rows", type=int, default=1, help="rows per request")
    ap.add_argument("--skip-fault", action="store_true", help="only the load comparison")
    ap.add_argument("--reader", choices=["default", "fake"], help="default: the real reader (--load-fault: fake)")
    ap.add_argument(
        "--load-fault",
        action="store_true",
        help="only the mixed load of three tenants with an encoder replica and the ingress killed",
    )
    args = ap.parse_args()
    args.reader = args.reader or ("fake" if args.load_fault else "default")
    args.requests = args.requests or (lf.Plan.requests if args.load_fault else 512)
    factory = lf.DEFAULT_READER if args.reader == "default" else lf.FAKE_READER
    from cg_ray.hardware import hardware_info, resolve_dtype

    print(f"hardware: {hardware_info().line()}; reader dtype auto = {resolve_dtype('auto', 'cpu')}")

    from ray import serve

    tmp = Path(tempfile.mkdtemp(prefix="cgb", dir="/tmp"))
    results: dict[str, Any] = {}
    try:
        with lf.local_serve(tmp) as port:
            if args.load_fault:
                load_fault(port, tmp, factory, args.requests)
                return
            for mode, batch in (("unbatched", 1), ("batched", 64)):
                base, headers = deploy(port, tmp / mode, factory, batch, replicas=1)
                asyncio.run(load(base, headers, args.clients, args.rows))  # warm-up
                results[mode] = asyncio.run(load(base, headers, args.requests, args.rows, args.clients))
                serve.delete(lf.APP)
                r = results[mode]
                print(
                    f"{mode:>9}: {r['ok']} ok, {r['errors']} errors; p50 {r['p50_s']:.2f} s, "
                    f"p99 {r['p99_s']:.2f} s; {r['rows_per_s']:.0f} rows/s "
                    f"({args.requests} requests × {args.rows} rows, {args.clients} clients)"
                )
            if not args.skip_fault:
                fault(port, tmp, factory, args, results)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    speedup = results["batched"]["rows_per_s"] / results["unbatched"]["rows_per_s"]
    print(f"speedup of @serve.batch over unbatched encoding: {speedup:.2f}x")


def load_fault(port: int, tmp: Path, factory: str, requests: int) -> None:
    """The load-and-fault run of tests/serve/test_load_fault.py, with its figures printed."""
    report = lf.deploy_and_run(port, tmp / "load-fault", factory, lf.Plan(requests=requests))
    print("\n".join(report.lines()))


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
