"""The real Ray Serve application on 127.0.0.1, driven from outside: a local Ray + Serve, the app deployed on
an isolated data directory, replicas killed, and a mixed load from several tenants recorded call by call.

Shared by `benchmarks/bench_serve.py` and the load-and-fault test (tests/serve/test_load_fault.py). Loopback
only: nothing here listens beyond 127.0.0.1 or talks to another host.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import statistics
import time
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import httpx

from cg_ray.testing.local_serve import (
    APP,
    DEFAULT_READER,
    FAKE_READER,
    TERMINAL,
    deploy,
    free_port,
    jsonl,
    kill_replica,
    local_serve,
    replica_names,
    tenant,
    texts,
)

# re-exported: the benchmark and the tests reach the local service through this module
__all__ = ["APP", "DEFAULT_READER", "FAKE_READER", "LoadFault", "Plan", "Report", "deploy", "deploy_and_run"]
__all__ += ["free_port", "jsonl", "kill_replica", "local_serve", "replica_names", "tenant", "texts"]


@dataclasses.dataclass
class Call:
    kind: str
    tenant: int
    status: int  # HTTP status; 0: no answer (connection error)
    start: float  # seconds since the load began
    end: float
    leak: str = ""  # what another tenant's row showed up as, if one did


@dataclasses.dataclass
class Plan:
    requests: int = 200
    tenants: int = 3
    spacing_s: float = 0.1  # one request every spacing_s, whatever the others do: they pile up when it stalls
    after_restart: float = 0.2  # this fraction of the requests is sent once the restarted ingress answers
    kill_encoder_at: float = 0.25  # fractions of the requests sent before the restart
    restart_ingress_at: float = 0.5
    upload_rows: int = 40
    score_rows: int = 4
    settle_s: float = 120.0  # after the load: how long accepted analyses get to finish
    max_concurrent_analyses: int = 4  # per tenant: some analysis requests meet the limit (429)


KINDS = ("upload", "analysis", "status", "list", "result", "score", "probe")


@dataclasses.dataclass
class Report:
    plan: Plan
    began_at: float  # time.time() when the load began: call times are seconds after it (to read logs against)
    calls: list[Call]
    encoder_killed_at: float
    ingress_killed_at: float
    ingress_back_at: float
    load_s: float
    uploads: dict[int, list[str]]  # accepted (2xx) ids, by tenant
    analyses: dict[int, list[str]]
    unacknowledged: dict[int, list[str]]  # analyses stored although their creation was answered 5xx (a crash)
    outcomes: dict[str, dict[str, Any]]  # analysis id: its final view (or what it was at the deadline)
    lost: list[str]  # accepted ids their owner could not read back after the load
    leaks: list[str]  # another tenant's id seen or readable by a tenant
    killed_ingress: str = ""  # the ingress replica's actor name (it ends with the replica id its leases carry)
    lease_owners: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # from the store, after the run

    def runs(self) -> dict[str, int]:
        """From the store's leases: analyses claimed once, taken over from the killed replica, run twice (0)."""
        victim = self.killed_ingress.rsplit("#", 1)[-1] or "?"
        counts = {"once": 0, "taken_over": 0, "twice": 0}
        for analysis_id in self.outcomes:
            held = self.lease_owners.get(analysis_id, [])[:-1]  # every claimer before the last
            counts["once" if not held else "taken_over" if all(victim in o for o in held) else "twice"] += 1
        return counts

    def in_window(self, call: Call) -> bool:
        return call.start <= self.ingress_back_at and call.end >= self.ingress_killed_at

    def server_errors_outside_window(self) -> list[Call]:
        return [c for c in self.calls if (c.status >= 500 or c.status == 0) and not self.in_window(c)]

    def unfinished(self) -> dict[str, dict[str, Any]]:
        """Accepted analyses that did not end succeeded, or failed with a reason."""
        return {
            a: v
            for a, v in self.outcomes.items()
            if not (v["status"] == "succeeded" or (v["status"] == "failed" and v.get("error")))
        }

    def figures(self) -> dict[str, Any]:
        by_kind: dict[str, dict[str, Any]] = {}
        for kind in KINDS:
            calls = [c for c in self.calls if c.kind == kind]
            lat = sorted(c.end - c.start for c in calls)
            by_kind[kind] = {
                "requests": len(calls),
                "codes": dict(sorted(Counter(c.status for c in calls).items())),
                "p50_s": percentile(lat, 50),
                "p99_s": percentile(lat, 99),
            }
        every = sorted(c.end - c.start for c in self.calls)
        outside = sorted(c.end - c.start for c in self.calls if not self.in_window(c))
        return {
            "requests": len(self.calls),
            "codes": dict(sorted(Counter(c.status for c in self.calls).items())),
            "p50_s": percentile(every, 50),
            "p99_s": percentile(every, 99),
            "outside_window": {
                "requests": len(outside),
                "p50_s": percentile(outside, 50),
                "p99_s": percentile(outside, 99),
            },
            "max_in_flight": max_in_flight(self.calls),
            "by_kind": by_kind,
            "load_s": self.load_s,
            "encoder_killed_at_s": self.encoder_killed_at,
            "restart_window_s": (self.ingress_killed_at, self.ingress_back_at),
            "5xx_in_window": sum(1 for c in self.calls if (c.status >= 500 or c.status == 0) and self.in_window(c)),
            "5xx_outside_window": len(self.server_errors_outside_window()),
            "analyses": dict(sorted(Counter(v["status"] for v in self.outcomes.values()).items())),
            "unacknowledged": sum(len(ids) for ids in self.unacknowledged.values()),
            "unfinished": len(self.unfinished()),
            "lost": len(self.lost),
            "leaks": len(self.leaks),
            "runs": self.runs(),
            "in_flight_at_kill": sum(1 for c in self.calls if c.start <= self.ingress_killed_at <= c.end),
        }

    def lines(self) -> list[str]:
        f = self.figures()
        start, end = f["restart_window_s"]
        out = [
            f"load and fault: {f['requests']} requests from {self.plan.tenants} tenants over {f['load_s']:.1f} s "
            f"(at most {f['max_in_flight']} in flight); status codes {codes(f['codes'])}; "
            f"p50 {f['p50_s']:.2f} s, p99 {f['p99_s']:.2f} s",
        ]
        for kind, k in f["by_kind"].items():
            out.append(
                f"  {kind:>8}: {k['requests']:3d} requests, codes {codes(k['codes'])}; "
                f"p50 {k['p50_s']:.2f} s, p99 {k['p99_s']:.2f} s"
            )
        o = f["outside_window"]
        out += [
            f"  encoder replica killed at {f['encoder_killed_at_s']:.1f} s; ingress killed at {start:.1f} s, "
            f"answering again at {end:.1f} s (restart window {end - start:.1f} s)",
            f"  5xx / no answer: {f['5xx_in_window']} in the restart window, {f['5xx_outside_window']} outside it; "
            f"the {o['requests']} requests outside the window: p50 {o['p50_s']:.2f} s, p99 {o['p99_s']:.2f} s",
            f"  analyses: {sum(f['analyses'].values())} ({codes(f['analyses'])}), of which "
            f"{f['unacknowledged']} created by requests answered 5xx; not finished or failed without a reason: "
            f"{f['unfinished']}; accepted ids lost: {f['lost']}; cross-tenant leaks: {f['leaks']}",
            f"  ingress replica killed: {self.killed_ingress or '-'}; {f['in_flight_at_kill']} requests in flight "
            f"then; analyses run (store's leases): {codes(f['runs'])}",
        ]
        return out


def codes(counts: dict[Any, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items()) or "-"


def percentile(sorted_values: list[float], q: int) -> float:
    if not sorted_values:
        return float("nan")
    if len(sorted_values) == 1:
        return sorted_values[0]
    return statistics.quantiles(sorted_values, n=100, method="inclusive")[q - 1]


def max_in_flight(calls: list[Call]) -> int:
    edges = sorted([(c.start, 1) for c in calls] + [(c.end, -1) for c in calls])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


class LoadFault:
    """One run: seed each tenant with an upload and a finished analysis, send the mixed load on a fixed
    schedule while one encoder replica is killed and the ingress replica is killed (Serve restarts it), let
    accepted analyses finish, then check that every accepted id is still there and stays its owner's."""

    def __init__(self, base: str, tenants: list[dict[str, str]], plan: Plan) -> None:
        self.base, self.keys, self.plan = base, tenants, plan
        self.t0 = 0.0
        self.calls: list[Call] = []
        self.uploads: dict[int, list[str]] = {t: [] for t in range(len(tenants))}
        self.analyses: dict[int, list[str]] = {t: [] for t in range(len(tenants))}
        self.unacknowledged: dict[int, list[str]] = {t: [] for t in range(len(tenants))}
        self.seed_analysis: dict[int, str] = {}
        self.back = asyncio.Event()  # set when the restarted ingress answers
        self.killed_ingress = ""

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def run(self) -> Report:
        limits = httpx.Limits(max_connections=self.plan.requests + 10, max_keepalive_connections=20)
        async with httpx.AsyncClient(base_url=self.base, timeout=180, limits=limits) as client:
            await self.seed(client)
            self.t0, began_at = time.monotonic(), time.time()
            faults = asyncio.create_task(self.faults(client))
            await asyncio.gather(*(self.scheduled(client, i) for i in range(self.plan.requests)))
            load_s = self.now()
            encoder_killed_at, ingress_killed_at, ingress_back_at = await faults
            await self.find_unacknowledged(client)
            outcomes = await self.settle(client)
            lost, leaks = await self.check_ownership(client)
        leaks += [f"call {c.kind} of tenant {c.tenant}: {c.leak}" for c in self.calls if c.leak]
        return Report(
            self.plan,
            began_at,
            self.calls,
            encoder_killed_at,
            ingress_killed_at,
            ingress_back_at,
            load_s,
            self.uploads,
            self.analyses,
            self.unacknowledged,
            outcomes,
            lost,
            leaks,
            self.killed_ingress,
        )

    async def seed(self, client: httpx.AsyncClient) -> None:
        """Each tenant gets an upload and a succeeded analysis, so that reads of results have something to read."""
        for t, headers in enumerate(self.keys):
            up = await client.post("/v1/uploads", headers=headers, files={"file": ("seed.jsonl", jsonl(30, t))})
            up.raise_for_status()
            self.uploads[t].append(up.json()["id"])
            ana = await client.post("/v1/analyses", headers=headers, json={"upload_ids": [up.json()["id"]]})
            ana.raise_for_status()
            self.seed_analysis[t] = ana.json()["id"]
            self.analyses[t].append(ana.json()["id"])
        for t, analysis_id in self.seed_analysis.items():
            view = await self.wait(client, t, analysis_id, time.monotonic() + self.plan.settle_s)
            if view.get("status") != "succeeded":
                raise RuntimeError(f"seed analysis of tenant {t}: {view}")

    async def wait(self, client: httpx.AsyncClient, t: int, analysis_id: str, deadline: float) -> dict[str, Any]:
        view: dict[str, Any] = {"status": "unknown"}
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                r = await client.get(f"/v1/analyses/{analysis_id}", headers=self.keys[t])
                if r.status_code == 200:
                    view = r.json()
                    if view["status"] in TERMINAL:
                        return view
            await asyncio.sleep(0.25)
        return view

    async def faults(self, client: httpx.AsyncClient) -> tuple[float, float, float]:
        """Kill an encoder replica, then the ingress replica; the window ends when the app answers again."""
        before = self.before_restart() * self.plan.spacing_s
        await asyncio.sleep(max(0.0, self.plan.kill_encoder_at * before - self.now()))
        encoder_at = self.now()
        await asyncio.to_thread(kill_replica, "encoder")
        await asyncio.sleep(max(0.0, self.plan.restart_ingress_at * before - self.now()))
        ingress_at = self.now()
        self.killed_ingress = await asyncio.to_thread(kill_replica, "ingress")
        while True:  # a probe waits in Serve's queue until a replica takes it: no short timeout
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get("/readyz", timeout=300)).status_code == 200:
                    self.back.set()
                    return encoder_at, ingress_at, self.now()
            await asyncio.sleep(0.1)

    def before_restart(self) -> int:
        """How many requests are sent on the schedule from the start (the rest once the ingress is back)."""
        return round(self.plan.requests * (1 - self.plan.after_restart))

    async def scheduled(self, client: httpx.AsyncClient, i: int) -> None:
        n = self.before_restart()
        if i >= n:
            await self.back.wait()
        await asyncio.sleep((i if i < n else i - n) * self.plan.spacing_s)
        t = i % len(self.keys)
        kind = KINDS[(i // len(self.keys)) % len(KINDS)]
        start = self.now()
        leak = ""
        try:
            r = await self.send(client, kind, t, i)
            status = r.status_code
            if kind == "upload" and status == 201:
                self.uploads[t].append(r.json()["id"])
            elif kind == "analysis" and status == 202:
                self.analyses[t].append(r.json()["id"])
            elif kind == "list" and status == 200:
                leak = self.foreign_ids(t, {row["id"] for row in r.json()})
            elif kind == "probe" and status != 404 and status < 500:
                leak = f"another tenant's row answered {status}"
        except httpx.HTTPError:
            status = 0
        self.calls.append(Call(kind, t, status, start, self.now(), leak))

    async def send(self, client: httpx.AsyncClient, kind: str, t: int, i: int) -> httpx.Response:
        headers = self.keys[t]
        mine = self.seed_analysis[t]
        if kind == "upload":
            body = jsonl(self.plan.upload_rows, i)
            return await client.post("/v1/uploads", headers=headers, files={"file": (f"u{i}.jsonl", body)})
        if kind == "analysis":
            upload = self.uploads[t][-1]  # the tenant's latest accepted upload
            return await client.post("/v1/analyses", headers=headers, json={"upload_ids": [upload]})
        if kind == "status":
            return await client.get(f"/v1/analyses/{self.analyses[t][-1]}", headers=headers)
        if kind == "list":
            return await client.get("/v1/uploads" if i % 2 else "/v1/analyses", headers=headers)
        if kind == "result":
            path = "summary" if i % 2 else "concepts?limit=5"
            return await client.get(f"/v1/analyses/{mine}/{path}", headers=headers)
        if kind == "score":
            return await client.post("/v1/score", headers=headers, json={"texts": texts(self.plan.score_rows, i)})
        # probe: another tenant's upload, analysis or results, by id: must be 404
        other = (t + 1 + i % (len(self.keys) - 1)) % len(self.keys)
        target = (
            f"/v1/uploads/{self.uploads[other][-1]}",
            f"/v1/analyses/{self.seed_analysis[other]}",
            f"/v1/analyses/{self.seed_analysis[other]}/summary",
        )[i % 3]
        return await client.get(target, headers=headers)

    def foreign_ids(self, t: int, seen: set[str]) -> str:
        foreign = {
            x for o in self.uploads if o != t for x in self.uploads[o] + self.analyses[o] + self.unacknowledged[o]
        }
        return ", ".join(sorted(seen & foreign))

    async def find_unacknowledged(self, client: httpx.AsyncClient) -> None:
        """Analyses a tenant lists that no 2xx named: stored just before a crash answered their creation.
        They are the tenant's as much as the acknowledged ones, and must finish too."""
        for t, headers in enumerate(self.keys):
            r = await client.get("/v1/analyses", headers=headers)
            r.raise_for_status()
            self.unacknowledged[t] = sorted({row["id"] for row in r.json()} - set(self.analyses[t]))

    async def settle(self, client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + self.plan.settle_s
        owned = [(t, a) for t in self.analyses for a in self.analyses[t] + self.unacknowledged[t]]
        waits: list[Awaitable[dict[str, Any]]] = [self.wait(client, t, a, deadline) for t, a in owned]
        return dict(zip((a for _, a in owned), await asyncio.gather(*waits), strict=True))

    async def check_ownership(self, client: httpx.AsyncClient) -> tuple[list[str], list[str]]:
        """Every accepted id reads back for its owner (and is listed); for every other tenant it is a 404."""
        lost: list[str] = []
        leaks: list[str] = []
        for t, headers in enumerate(self.keys):
            listed = set()
            for path in ("/v1/uploads", "/v1/analyses"):
                r = await client.get(path, headers=headers)
                r.raise_for_status()
                listed |= {row["id"] for row in r.json()}
            if foreign := self.foreign_ids(t, listed):
                leaks.append(f"tenant {t} lists {foreign}")
            for owner in self.uploads:
                analyses = self.analyses[owner] + self.unacknowledged[owner]
                for path, ids in (("uploads", self.uploads[owner]), ("analyses", analyses)):
                    for item in ids:
                        status = (await client.get(f"/v1/{path}/{item}", headers=headers)).status_code
                        if owner == t and (status != 200 or item not in listed):
                            lost.append(f"{item} of tenant {t} (answers {status}, listed: {item in listed})")
                        elif owner != t and status != 404:
                            leaks.append(f"tenant {t} reads {item} of tenant {owner}: {status}")
        return lost, leaks


def deploy_and_run(port: int, data: Path, factory: str, plan: Plan) -> Report:
    """Deploy the app (two encoder replicas, the default two ingress replicas) on `data`, make the plan's
    tenants, run the plan; the store's lease records (who ran each analysis) come with the report."""
    from cg_ray.serve.db import Store
    from cg_ray.serve.settings import ServiceSettings

    base = deploy(port, data, factory, 64, replicas=2, max_concurrent_analyses=plan.max_concurrent_analyses)
    tenants = [tenant(data, f"tenant-{t}") for t in range(plan.tenants)]
    report = asyncio.run(LoadFault(base, tenants, plan).run())
    report.lease_owners = Store(ServiceSettings(data_dir=data).db_url).lease_owners()
    return report
