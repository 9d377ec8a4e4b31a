"""The test harness' local Serve (cg_ray.testing.local_serve) survives losing its port before the proxy binds
it, as a full test run once did ("Failed to bind to address")."""

from __future__ import annotations

import socket
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import cg_ray.testing.local_serve as local


@pytest.mark.slow
def test_a_port_taken_before_the_proxy_binds_it_is_replaced_by_another(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        held = taken.getsockname()[1]
        picks = iter([held])
        free = local.free_port
        monkeypatch.setattr(local, "free_port", lambda: next(picks, None) or free())
        with tempfile.TemporaryDirectory(prefix="cgls", dir="/tmp") as tmp, local.local_serve(Path(tmp)) as port:
            assert port != held
            # Serve's proxy answers HTTP there (503 until an application is deployed); nothing listening
            # would refuse the connection.
            with pytest.raises(urllib.error.HTTPError) as answered:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/-/routes", timeout=30)
            assert answered.value.code == 503


def test_a_proxy_killed_while_starting_is_started_again_and_other_errors_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ray import serve
    from ray.exceptions import ActorDiedError

    def died(what: str) -> ActorDiedError:
        error = ActorDiedError()
        error.error_msg = f"The actor died unexpectedly before finishing this task.\n\tclass_name: {what}"
        return error

    shutdowns: list[int] = []
    monkeypatch.setattr(serve, "shutdown", lambda: shutdowns.append(1))
    outcomes = iter([died("ProxyActor"), None])

    def start(**kwargs: object) -> None:
        if (error := next(outcomes)) is not None:
            raise error

    monkeypatch.setattr(serve, "start", start)
    assert local.start_proxy() > 0 and len(shutdowns) == 1

    def other(**kwargs: object) -> None:
        raise died("ServeController")

    monkeypatch.setattr(serve, "start", other)
    with pytest.raises(ActorDiedError, match="ServeController"):
        local.start_proxy()
