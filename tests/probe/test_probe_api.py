"""The probe as a library call (cg_ray.probe.api.probe_run), on the fixture the CLI's tests use: it returns
the summary the probe writes and the lines `cg-ray probe` prints, and bad input is an exception carrying its
message, not printed text."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from cg_ray.artifacts import layout as L
from cg_ray.cli.probe import register
from cg_ray.errors import CgRayError, ConfigError
from cg_ray.probe.api import attempt_lines, probe_run, probe_settings
from cg_ray.probe.config import ProbeConfig
from tests.describe.endpoint_server import serve
from tests.probe.scripted_probe import probe_config, script, write_run

DOWN = "http://127.0.0.1:9/v1"  # nothing listens: a dry run sends nothing


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("probe_api") / "run")


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["probe", *argv])
    return int(args.handler(args))


def test_the_lines_said_are_those_the_cli_prints(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import cg_ray.probe.plan as plan
    import cg_ray.probe.run as run

    gap = {"gap_id": "mode:1", "verdict": "too_few", "difference": 0.0, "ci_low": None, "ci_high": None,
           "n_pairs": 1, "note": "1 pairs, under 5", "probe": 1, "pairs_written": 40, "reader_checked": 10,
           "reader_passed": 2, "generator": "logic"}  # fmt: skip
    summary: dict[str, Any] = {"gaps": [gap], "requests": {"writer": 3}, "seconds": {"write": 1.5},
                               "probes": [{"probe": 1}]}  # fmt: skip
    monkeypatch.setattr(plan, "make_plan", lambda *a, **k: None)
    monkeypatch.setattr(run, "run_probe", lambda *a, **k: summary)
    assert cli(str(tmp_path)) == 0
    printed = capsys.readouterr().out
    said: list[str] = []
    outcome = probe_run(tmp_path, ProbeConfig(), say=said.append)
    assert outcome.summary == summary and outcome.report is None and outcome.lines == said
    assert printed == "".join(f"{line}\n" for line in said)
    assert said[1:3] == attempt_lines(summary) and "next: the reader saw the gap in 2 of 10" in said[2]
    assert said[-1] == f"wrote {tmp_path / 'probe'} (items.parquet, results.parquet, summary.json, export/)"


def test_a_dry_run_returns_the_plan_the_cli_prints(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(str(run_dir), "--families", "only", "--model-endpoint", DOWN, "--model", "m", "--dry-run") == 0
    printed = capsys.readouterr().out
    config = probe_settings({"families": "only", "model": {"backend": "endpoint", "model": "m",
                             "endpoint": {"url": DOWN}, "sampling": {"temperature": 0.0}}})  # fmt: skip
    outcome = probe_run(run_dir, config, dry_run=True)
    assert outcome.summary is None and printed == "".join(f"{line}\n" for line in outcome.lines)
    assert outcome.lines[0].startswith(f"probe of {run_dir}: ") and "  probe 1: Benjamini–Hochberg" in outcome.lines[1]


def test_bad_input_raises_its_error_with_its_message(run_dir: Path) -> None:
    config = probe_settings({"gaps": ["mode:99"], "families": "only", "model": {"backend": "endpoint",
                             "model": "m", "endpoint": {"url": DOWN}}})  # fmt: skip
    said: list[str] = []
    with pytest.raises(CgRayError, match=r"unknown gap 'mode:99'") as raised:
        probe_run(run_dir, config, dry_run=True, say=said.append)
    assert "mode:1, mode:2" in str(raised.value) and said == []
    with pytest.raises(ConfigError, match=r"^probe setting pairs: "):
        probe_settings({"pairs": 2})


@pytest.mark.slow
@pytest.mark.usefixtures("ray_module")
def test_a_probe_returns_the_summary_it_wrote(run_dir: Path) -> None:
    with serve(script()) as url:
        config = ProbeConfig.model_validate(probe_config(url, 0, 40) | {"gaps": ["mode:1"]})
        said: list[str] = []
        outcome = probe_run(run_dir, config, fresh=True, say=said.append)
    written = json.loads((run_dir / L.PROBE_SUMMARY).read_text(encoding="utf-8"))
    written.pop("format_version")  # the stamp every published JSON file carries
    assert outcome.summary == written
    assert outcome.summary["gaps"][0]["gap_id"] == "mode:1"
    assert said[-len(outcome.lines) :] == outcome.lines and outcome.lines[0] == ""
    assert outcome.lines[1 : 1 + len(attempt_lines(outcome.summary))] == attempt_lines(outcome.summary)
    assert outcome.lines[-1].startswith(f"wrote {run_dir / 'probe'} ")


def test_the_service_job_records_the_error_it_raised(run_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """The service's probe job (cg_ray.serve.probe_job) runs the library and writes the error's message to its
    outcome itself: the status document reads it there, not from printed text."""
    from cg_ray.serve import probe_job, probes

    monkeypatch.setenv(probe_job.RAY_PROGRESS_INTERVAL[0], probe_job.RAY_PROGRESS_INTERVAL[1])
    settings = {"gaps": ["mode:99"], "families": "only",
                "model": {"backend": "endpoint", "model": "m", "endpoint": {"url": DOWN}}}  # fmt: skip
    (tmp_path / probes.CONFIG).write_text(json.dumps(settings))
    (tmp_path / probes.STARTED).write_text(json.dumps({"pid": 1, "command": "probe", "settings": settings}))
    assert probe_job.main([str(tmp_path), str(run_dir)]) == 2
    outcome = json.loads((tmp_path / probes.OUTCOME).read_text())
    assert outcome["returncode"] == 2 and outcome["error"].startswith("cg-ray probe: error: unknown gap 'mode:99'")
    found = probes.job_report(tmp_path)
    assert found is not None and found["status"] == "failed" and found["error"] == outcome["error"]
