"""`cg-ray run` ends as `cg-ray metrics` does: with what the run confirmed held out and the next step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.judged_run import mode, slice_, write_run

JOB = Path(__file__).resolve().parents[2] / "jobs" / "default.yaml"


def test_a_run_ends_with_its_judged_findings_and_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import cg_ray.pipeline.runner as runner
    from cg_ray import cli

    run_dir = write_run(tmp_path / "run", [mode(1, True, "draw"), mode(2, False, "pawn")], [slice_(1, True, "x")], [])
    monkeypatch.setattr(runner, "run", lambda *args, **kwargs: run_dir)  # the pipeline itself: tests/pipeline
    assert cli.main(["run", str(JOB), "--no-report"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("findings (failure modes, slices, concepts) chosen on one half of the rows")
    assert any("Rows with “draw”" in line and "q=0.003" in line for line in lines)
    assert f"  next: test it on new items with matched controls: cg-ray probe {run_dir} --gap mode:2  " in "\n".join(
        lines
    )


def test_cg_ray_run_is_the_step_the_cli_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cg_ray.run(config)` from a notebook: a YAML path or a RunConfig, the same options as the flags, the
    published directory back, and a cg_ray error raised inside a Ray task as a CgRayError with its message."""
    import ray.exceptions

    import cg_ray
    import cg_ray.pipeline.runner as runner
    from cg_ray.errors import CgRayError
    from cg_ray.pipeline.config import load_run_config

    calls: list[tuple[object, runner.RunOptions, str | None]] = []

    def fake_run(config: object, options: runner.RunOptions, config_source: str | None = None) -> Path:
        calls.append((config, options, config_source))
        return tmp_path

    monkeypatch.setattr(runner, "run", fake_run)
    assert cg_ray.run(JOB, resume=True, shard_rows=8) == tmp_path
    config, options, source = calls[0]
    assert config == load_run_config(JOB) and source == str(JOB)
    assert (options.resume, options.overwrite, options.shard_rows, options.report) == (True, False, 8, True)
    assert cg_ray.run(load_run_config(JOB), report=False) == tmp_path
    assert calls[1][1].report is False and calls[1][2] is None

    def refused(*_: object, **__: object) -> Path:
        raise ray.exceptions.RayError("Traceback …\ncg_ray.generation.endpoint.EndpointRefused: 401 from the endpoint")

    monkeypatch.setattr(runner, "run", refused)
    with pytest.raises(CgRayError, match=r"^401 from the endpoint$"):
        cg_ray.run(JOB)


@pytest.mark.parametrize(("flags", "interval"), [([], 60), (["-v"], 10)])
def test_ray_datas_progress_log_is_once_a_minute_unless_verbose(flags: list[str], interval: int) -> None:
    """Ray Data reads the interval when it is imported: a fresh process, as `cg-ray run` is."""
    import os
    import subprocess
    import sys

    code = (
        "import sys; from cg_ray.cli import main\n"
        f"assert main({flags!r} + ['run', '/nonexistent/job.yaml']) == 2\n"  # refused before any work
        "from ray.data._internal.progress.logging_progress import LoggingExecutionProgressManager as P\n"
        "print(P.LOG_REPORT_INTERVAL_SEC)"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_DATA_NON_TTY_PROGRESS_LOG_INTERVAL"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == str(interval)
