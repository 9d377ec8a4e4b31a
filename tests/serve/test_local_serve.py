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
