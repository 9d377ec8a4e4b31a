"""`cg-ray` in a process of its own, in its own process group (a kill test SIGKILLs the group mid-way)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli_process(args: list[str]) -> subprocess.Popen[bytes]:
    """`cg-ray ARGS` started in a new session, this checkout's cg_ray imported; stderr kept for `finish`."""
    code = f"from cg_ray.cli import main; raise SystemExit(main({args!r}))"
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip


def finish(proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    """Wait for it; a failure shows the end of its stderr."""
    _, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, err.decode()[-3000:]
