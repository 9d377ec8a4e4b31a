"""Load and fault against the real Ray Serve application on 127.0.0.1 (issue #12, item 5).

200 requests from three tenants (uploads, analysis creations, status / list / result reads, /v1/score and
reads of another tenant's ids), sent on a fixed schedule so they pile up concurrently, while one of two
encoder replicas is killed and then the ingress replica is killed (Serve's controller restarts it); the
last fifth is sent once the restarted ingress answers. The restart window runs from the kill to that
answer; a request overlapping it may get a 5xx (it was inside the replica that died), no other may. The
figures are printed (`pytest -s`); `benchmarks/bench_serve.py --load-fault` prints the same run.

The encoder runs the hashing fake reader (same interface) so the run stays bounded on two CPU cores: what
is under test is the service around the reader (routing, retries, restart, the database, isolation); the
real reader's deployment is exercised by the reader tests and the service benchmark.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.mark.slow
def test_load_with_an_encoder_replica_and_the_ingress_killed(monkeypatch) -> None:
    from cg_ray.serve.db import Analysis, Store, Upload
    from cg_ray.serve.settings import ServiceSettings
    from cg_ray.testing.loadfault import FAKE_READER, Plan, deploy_and_run, local_serve

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    tmp = Path(tempfile.mkdtemp(prefix="cgf", dir="/tmp"))  # short: Ray's socket paths have a length limit
    try:
        with local_serve(tmp) as port:
            report = deploy_and_run(port, tmp / "data", FAKE_READER, Plan())
        print("\n".join(report.lines()))
        # After the cluster is gone, straight from the database: every accepted id is a row of its tenant's key.
        store = Store(ServiceSettings(data_dir=tmp / "data").db_url)
        owners = []
        for t in range(report.plan.tenants):
            rows = [store.get_owned_any(Upload, u) for u in report.uploads[t]]
            rows += [store.get_owned_any(Analysis, a) for a in report.analyses[t] + report.unacknowledged[t]]
            assert all(r is not None for r in rows), f"tenant {t}: accepted ids missing from the database"
            assert len({r.owner for r in rows}) == 1, f"tenant {t}: rows under more than one key"
            owners.append(rows[0].owner)
        assert len(set(owners)) == report.plan.tenants
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    figures = report.figures()
    assert figures["requests"] == report.plan.requests
    # The faults happened while the load ran, and the load went on once the ingress was back.
    start, end = figures["restart_window_s"]
    assert 0 < figures["encoder_killed_at_s"] < start < end
    assert any(c.start < figures["encoder_killed_at_s"] for c in report.calls)
    assert any(figures["encoder_killed_at_s"] < c.start < start for c in report.calls)
    # At least the last fifth: with two ingress replicas (the default) the other one answers at once, so the
    # scheduled load is still going when the probe comes back.
    assert sum(c.start >= end for c in report.calls) >= round(report.plan.requests * report.plan.after_restart)
    assert not report.server_errors_outside_window(), report.server_errors_outside_window()
    for kind, k in figures["by_kind"].items():  # every kind of request was served, not just answered
        ok = 404 if kind == "probe" else 200
        assert any(ok <= code < ok + 100 for code in k["codes"]), (kind, k)
    assert len(report.outcomes) > report.plan.tenants  # analyses accepted during the load, not only the seeds
    assert not report.unfinished(), report.unfinished()
    assert not report.lost, report.lost
    assert not report.leaks, report.leaks
