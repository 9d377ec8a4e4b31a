"""`cg-ray run` ends as `cg-ray metrics` does: with what the run confirmed held out and the next step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.crossfit_run import mode, slice_, write_run

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
