"""Bad input and interruptions of `cg-ray augment`: a run without scope/, an unknown benchmark, a --gap that is
not an in-scope gap of it, a writer endpoint that is down. Each is a clear error that leaves nothing written;
a killed augment resumes without asking the writer again for the items it already wrote."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from cg_ray.artifacts import layout as L
from cg_ray.augment.config import AugmentConfig
from cg_ray.augment.plan import make_plan
from cg_ray.augment.run import run_augment
from cg_ray.cli import main
from cg_ray.probe import work as work_module
from tests.augment.scripted import READER_FACTORY, build_run, item_requests, writer_script
from tests.describe.endpoint_server import serve

DOWN = "http://127.0.0.1:9/v1"  # nothing listens


@pytest.fixture(scope="module")
def scoped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("augment_errors"))


@pytest.fixture
def run(scoped: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(scoped, tmp_path / "run"))


def listing(run: Path) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in run.rglob("*"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--benchmark", "nope"], "no benchmark 'nope' in the run's scope (no such benchmark)"),
        (["--benchmark", "wide"], "wide has no in-scope gap against ref:traffic"),
        (["--benchmark", "narrow", "--gap", "concept:20"], "concept:20 is not an in-scope gap of narrow: in the "),
        (
            ["--benchmark", "narrow", "--gap", "concept:3"],
            "concept:3 is not an in-scope gap of narrow: not in the reference's use",
        ),
        (["--benchmark", "narrow", "--gap", "7"], "--gap '7': expected concept:ID"),
        (["--benchmark", "narrow", "--writer-endpoint", DOWN, "--writer-model", "m"], "unreachable"),
    ],
)
def test_bad_inputs_are_clear_errors_that_write_nothing(
    run: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "augment.yaml"  # a writer that does not retry: the endpoint that is down fails at once
    config.write_text(f"writer: {{endpoint: {DOWN}, model: m, retries: 0}}\n")
    before = listing(run)
    assert main(["augment", str(run), "--config", str(config), "--reader-factory", READER_FACTORY, *args]) == 2
    err = capsys.readouterr().err
    assert "cg-ray augment: error:" in err and message in err, err
    assert listing(run) == before
    assert not (run / "augment").exists() and not (run / "augment.work").exists()


def test_a_run_without_scope_is_told_to_run_scope_first(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.rmtree(run / "scope")
    before = listing(run)
    assert main(["augment", str(run), "--benchmark", "narrow", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "the run has no scope/: run `cg-ray scope" in err
    assert listing(run) == before


def test_a_killed_augment_resumes_without_asking_for_written_items_again(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_save = work_module.Work.save
    calls = {"n": 0}

    def save_then_die(self: work_module.Work, *args: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # killed after the first gap's items were saved, before the second's
            raise KeyboardInterrupt
        real_save(self, *args)

    script = writer_script("carry")
    with serve(script) as url:
        writer = {"endpoint": url, "model": "scripted-model", "retries": 0}
        config = AugmentConfig(benchmark="narrow", items=10, writer=writer, reader_factory=READER_FACTORY)
        monkeypatch.setattr(work_module.Work, "save", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            run_augment(make_plan(run, config), say=lambda _: None)
        assert not (run / "augment").exists()  # the killed attempt published nothing
        first = item_requests(script)
        assert any("Concept 7:" in p for p in first) and any("Concept 8:" in p for p in first)
        monkeypatch.setattr(work_module.Work, "save", real_save)
        summary = run_augment(make_plan(run, config), say=lambda _: None)
    resumed = item_requests(script)[len(first) :]
    assert resumed and not [p for p in resumed if "Concept 7:" in p]  # gap 7's items were not asked for again
    by_gap = {g["gap_id"]: g for g in summary["gaps"]}
    assert len(resumed) == by_gap["concept:8"]["requests"]
    assert by_gap["concept:7"]["kept"] > 0 and by_gap["concept:8"]["kept"] > 0
    assert (run / L.AUGMENT_SUMMARY).exists() and not (run / "augment.work").exists()
