"""Analysis leases (issue #25): several ingress replicas on one store run each in-service analysis exactly
once, and a dead replica's work is taken over once its lease has expired.

The replicas here are what an ingress replica runs (a `LeaseKeeper` with its lease loop, on its own event
loop in its own thread, over its own engine on the shared SQLite file); the work is a stub that records
which replica ran what, so many analyses race in a second or two without Ray.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from cg_ray.serve.db import Analysis, Store
from cg_ray.serve.keys import create_key
from cg_ray.serve.leases import LeaseKeeper, LeasePolicy

FAST = LeasePolicy(ttl_s=5.0, poll_s=0.05)


def _store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'cg_ray.db'}")


def _queue(store: Store, n: int, mode: str = "precomputed", prefix: str = "ana_") -> list[str]:
    """n analyses queued (as a replica that died before starting them would leave them)."""
    owner = create_key(store, f"alice-{prefix}")[0]
    ids = [f"{prefix}{i:04d}" for i in range(n)]
    with store.session() as s:
        for analysis_id in ids:
            s.add(Analysis(id=analysis_id, owner=owner, upload_ids=[], mode=mode, options={}))
    return ids


class Replica(threading.Thread):
    """One ingress replica's lease side, on its own loop and engine, running the stub work until stopped."""

    def __init__(self, url: str, name: str, ran: list[tuple[str, str]], work_s: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.store = Store(url)
        self.keeper = LeaseKeeper(self.store, FAST, name)
        self.ran, self.work_s = ran, work_s
        self.stopped = threading.Event()
        self.renewing = True

    def start_analysis(self, analysis_id: str) -> None:
        self.keeper.start(analysis_id, self.work(analysis_id))

    async def work(self, analysis_id: str) -> None:
        self.store.update_analysis(analysis_id, status="running")
        self.ran.append((analysis_id, self.keeper.name))
        await asyncio.sleep(self.work_s)
        self.store.update_analysis(analysis_id, status="succeeded")

    def run(self) -> None:
        asyncio.run(self.main())

    async def main(self) -> None:
        loop = asyncio.create_task(self.keeper.keep(self.start_analysis))
        while not self.stopped.is_set():
            await asyncio.sleep(0.02)
        loop.cancel()
        self.keeper.stop()
        await asyncio.sleep(0.05)


def _wait_all_done(store: Store, ids: list[str], timeout: float = 30.0, done: tuple[str, ...] = ("succeeded",)) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(store.get_owned_any(Analysis, a).status in done for a in ids):
            return
        time.sleep(0.05)
    raise AssertionError("not every analysis finished")


def _meet_at_first_sight(replica: Replica, barrier: threading.Barrier, from_the_end: bool) -> None:
    """The first time the replica finds claimable work, it waits for the other one to find it too; then the two
    claim the list from opposite ends and race where they meet. Without this, on a loaded machine one replica's
    poll could come round and claim all of it while the other slept (or before the other's thread had
    started); and two replicas claiming in the same order let one that trails by a step lose every claim
    (CI saw both), so the race this test is about would not happen."""
    claimable = replica.store.claimable
    waited = threading.Event()

    def met(limit: int = 100) -> list[str]:
        found = claimable(limit)
        if found and not waited.is_set():
            waited.set()
            barrier.wait(10)  # if the other never comes, the barrier breaks and "both won some" fails
        return found[::-1] if from_the_end else found

    replica.store.claimable = met  # type: ignore[method-assign]


def test_two_replicas_racing_on_one_store_run_each_analysis_exactly_once(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ran: list[tuple[str, str]] = []
    replicas = [Replica(str(store.engine.url), name, ran) for name in ("replica-a", "replica-b")]
    barrier = threading.Barrier(2)
    for r, from_the_end in zip(replicas, (False, True), strict=True):
        _meet_at_first_sight(r, barrier, from_the_end)
        r.start()
    ids = _queue(store, 40)
    try:
        _wait_all_done(store, ids)
    finally:
        for r in replicas:
            r.stopped.set()
        for r in replicas:
            r.join(5)
    runs = sorted(a for a, _ in ran)
    twice = sorted({(a, n) for a, n in ran if runs.count(a) > 1})
    assert runs == sorted(ids), (len(runs), twice[:6], store.lease_owners().get(twice[0][0]) if twice else None)
    assert {name for _, name in ran} == {"replica-a", "replica-b"}, "both replicas should have won some"
    owners = store.lease_owners()  # the record in the store: one claimer per analysis
    assert {a: len(o) for a, o in owners.items()} == {a: 1 for a in ids}
    assert all(store.get_owned_any(Analysis, a).status == "succeeded" for a in ids)


def test_claims_racing_in_threads_have_one_winner(tmp_path: Path) -> None:
    """Eight claimers (each its own engine) on each of 40 analyses at once: exactly one wins each."""
    store = _store(tmp_path)
    ids = _queue(store, 40)
    url = str(store.engine.url)
    wins: list[tuple[str, str]] = []
    barrier = threading.Barrier(8)

    def claimer(name: str) -> None:
        mine = Store(url)
        barrier.wait()
        for analysis_id in ids:
            if mine.claim(analysis_id, name, 60):
                wins.append((analysis_id, name))

    threads = [threading.Thread(target=claimer, args=(f"r{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(a for a, _ in wins) == ids


def test_a_dead_replicas_work_is_taken_over_after_its_lease_expires(tmp_path: Path) -> None:
    store = _store(tmp_path)
    [analysis_id] = _queue(store, 1)
    assert store.claim(analysis_id, "dead", ttl_s=0.5)  # claimed, then its replica dies: no renewal, no release
    survivor = Store(str(store.engine.url))
    assert not survivor.claim(analysis_id, "survivor", 5)  # the lease still lives
    assert survivor.claimable() == []
    time.sleep(0.6)
    assert survivor.claimable() == [analysis_id]
    assert survivor.claim(analysis_id, "survivor", 5)
    assert not store.renew(analysis_id, "dead", 5)  # the old holder, if it wakes up, has lost it
    assert store.lease_owners() == {analysis_id: ["dead", "survivor"]}


def test_withdrawn_or_job_analyses_are_never_claimed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    cancelled, running, job = _queue(store, 3)
    store.update_analysis(cancelled, status="cancelled")
    store.update_analysis(job, job_id="raysubmit_1")
    assert store.claimable() == [running]
    assert not store.claim(cancelled, "a", 5) and not store.claim(job, "a", 5)
    assert not store.claim("ana_nope", "a", 5)
    assert store.claim(running, "a", 5)
    store.update_analysis(running, status="cancelled")
    assert not store.renew(running, "a", 5)  # cancelled through another replica: the holder stops its work
    [generate] = _queue(store, 1, mode="generate", prefix="gen_")  # always a Ray job, whatever its job_id
    assert generate not in store.claimable()


@pytest.mark.slow
def test_two_service_apps_on_one_store_run_queued_analyses_once(settings, monkeypatch) -> None:
    """The real service twice (two FastAPI apps, each its own lease loop and store engine): analyses queued
    by a replica that died before running them are run once, by one of the two, end to end."""
    from fastapi.testclient import TestClient

    from cg_ray.serve import analyses
    from cg_ray.serve.api import create_api
    from cg_ray.serve.encoding import LocalEncoder
    from cg_ray.testing.fakes import HashingReader

    store = Store(settings.db_url)
    headers = {"X-API-Key": create_key(store, "alice")[1]}
    with TestClient(create_api(settings, store, LocalEncoder(HashingReader(d_sae=32)), None)) as client:
        body = "\n".join(f'{{"id": {i}, "prompt": "text {i} of the row", "score": {i % 2}}}' for i in range(20))
        up = client.post("/v1/uploads", headers=headers, files={"file": ("a.jsonl", body)}).json()["id"]
    ran: list[str] = []
    real = analyses.run_guarded

    async def counted(store_: Store, analysis_id: str, work: analyses.Work) -> None:
        ran.append(analysis_id)
        await real(store_, analysis_id, work)

    monkeypatch.setattr(analyses, "run_guarded", counted)
    from cg_ray.serve.db import Upload

    upload_owner = store.get_owned_any(Upload, up).owner
    ids = [f"ana_q{i}" for i in range(6)]
    with store.session() as s:
        for analysis_id in ids:
            s.add(Analysis(id=analysis_id, owner=upload_owner, upload_ids=[up], mode="precomputed", options={}))
    apps = [create_api(settings, Store(settings.db_url), LocalEncoder(HashingReader(d_sae=32)), None) for _ in "ab"]
    for app, name in zip(apps, "ab", strict=True):
        app.state.service.leases = LeaseKeeper(app.state.service.store, FAST, name)
    with TestClient(apps[0]), TestClient(apps[1]):
        _wait_all_done(store, ids, timeout=60, done=("succeeded", "failed"))
    assert sorted(ran) == ids  # each run once (whatever its outcome: what is under test is who runs it)
    assert {a: len(o) for a, o in store.lease_owners().items() if a in ids} == {a: 1 for a in ids}
