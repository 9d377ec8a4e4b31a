"""An analysis' metrics task that waits for a CPU: reported waiting, run once a CPU frees up, or failed after
its deadline with the reason and nothing published (RayTasks on a local 2-CPU Ray)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from cg_ray.serve.analyses import RayTasks, compute_and_publish
from cg_ray.serve.resources import Unschedulable


def write(name: str, folder: Path) -> str:
    (folder / name).write_text("done")
    return name


class Hog:
    def ping(self) -> bool:
        return True


def test_a_task_that_never_gets_a_cpu_fails_at_its_deadline_saying_why(ray_module, tmp_path: Path) -> None:
    import ray

    hog = ray.remote(num_cpus=2)(Hog).remote()  # every CPU taken, for longer than the deadline
    assert ray.get(hog.ping.remote(), timeout=60)
    notices: list[str | None] = []
    offload = RayTasks(num_cpus=0.5, schedule_timeout_s=3.0, notice_s=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(Unschedulable) as failed:
            asyncio.run(compute_and_publish(offload, tmp_path / "a", lambda: True, write, "x", on_wait=notices.append))
    finally:
        ray.kill(hog)
    assert 2.5 < time.monotonic() - started < 15
    assert len(notices) == 1 and notices[0] is not None and "waiting for a CPU" in notices[0]
    assert "it needs 0.5" in notices[0] and "within 3 s" in notices[0]
    message = str(failed.value)
    assert "no CPU became free to run the analysis within 3 s (limits.analysis_schedule_timeout_s)" in message
    assert "needs 0.5 logical CPU" in message and "0 of the cluster's 2 are free" in message
    assert list(tmp_path.iterdir()) == []  # nothing published, no temporary folder left


def test_a_task_larger_than_the_node_fails_at_once_saying_why(ray_module, tmp_path: Path) -> None:
    with pytest.raises(Unschedulable, match=r"needs 3 logical CPU \(analysis_num_cpus\), more than the node has"):
        asyncio.run(compute_and_publish(RayTasks(num_cpus=3), tmp_path / "c", lambda: True, write, "z"))
    assert list(tmp_path.iterdir()) == []


def test_a_task_that_waited_runs_once_a_cpu_frees_up(ray_module, tmp_path: Path) -> None:
    import ray

    hog = ray.remote(num_cpus=2)(Hog).remote()  # every CPU taken
    assert ray.get(hog.ping.remote(), timeout=60)
    notices: list[str | None] = []

    async def run() -> None:
        task = asyncio.get_running_loop().create_task(
            compute_and_publish(
                RayTasks(num_cpus=0.5, schedule_timeout_s=60.0, notice_s=0.5),
                tmp_path / "b",
                lambda: True,
                write,
                "y",
                on_wait=notices.append,
            )
        )
        await asyncio.sleep(2.0)
        assert notices and notices[0] is not None and not task.done()  # still waiting, and it said so
        ray.kill(hog)
        await asyncio.wait_for(task, 60)

    asyncio.run(run())
    assert notices[-1] is None  # told that it runs after all
    assert (tmp_path / "b" / "y").read_text() == "done"
