"""The run directory owns its files (issue #24): a full run — metrics, describe, explain, validate,
robustness, report — holds only files `RunDir` names, every JSON versioned and readable through its model,
and manifest.json lists the steps that changed the run after it was published."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import cli
from cg_ray import schemas as S
from cg_ray.artifacts.contract import read_document
from cg_ray.artifacts.layout import ROBUSTNESS_CONCEPTS, ROBUSTNESS_JSON, RUN_ARTIFACTS, RunDir
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.explain import explain_run
from cg_ray.describe.run import DescribeOptions
from cg_ray.errors import CgRayError, InputError
from cg_ray.report.refresh import refresh_report

from ..describe.conftest import planted_rows, rows_schema
from ..describe.test_explain import ScriptedModel

STEPS = ["report", "describe", "explain", "validate", "robustness"]


@pytest.fixture(scope="module")
def built_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once (about 15 s); tests that change it work on a copy (`full_run`)."""
    root = tmp_path_factory.mktemp("walk")
    pq.write_table(pa.Table.from_pylist(planted_rows(), schema=rows_schema()), root / "rows.parquet")
    (root / "labels.jsonl").write_text(json.dumps({"concept_id": 0, "label": "geometry words"}) + "\n")
    run = root / "run"
    metrics = ["metrics", "--rows", str(root / "rows.parquet"), "--out", str(run), "--min-rows", "5"]
    assert cli.main([*metrics, "--labels", str(root / "labels.jsonl")]) == 0
    rows = str(run / S.ROWS_FILE)
    assert cli.main(["report", str(run), "--examples", "1"]) == 0
    assert cli.main(["describe", str(run), "--no-tokens", "--top", "3"]) == 0
    options = DescribeOptions(concepts=(0, 6), tokens=False)
    explain_run(RunDir(run), options, ExplainConfig(backend="fake", n_detect=6, fuzz=False), completer=ScriptedModel())
    refresh_report(RunDir(run))  # what `cg-ray explain` does after the step
    validate = ["validate", "--rows", rows, "--out", str(run), "--bootstrap", "20", "--random", "10", "--min-rows", "5"]
    assert cli.main(validate) == 0
    robustness = ["robustness", "--rows", rows, "--out", str(run / S.ROBUSTNESS_DIR), "--repeats", "3"]
    assert cli.main([*robustness, "--min-rows", "5", "--ablation-control-repeats", "2"]) == 0
    return run


@pytest.fixture
def full_run(built_run: Path, tmp_path: Path) -> Path:
    shutil.copytree(built_run, tmp_path / "run")
    return tmp_path / "run"


def test_every_file_is_named_by_run_dir_and_every_json_is_versioned(built_run: Path) -> None:
    full_run = built_run
    run = RunDir(full_run)
    found = sorted(p.relative_to(full_run).as_posix() for p in full_run.rglob("*") if p.is_file())
    assert [name for name in found if name not in RUN_ARTIFACTS] == []  # no stray file, no leftover temp file
    # what each step writes is there
    expected = {S.DESCRIPTIONS_FILE, S.THEMES_FILE, S.EXPLANATIONS_FILE, S.VALIDATE_FILE, ROBUSTNESS_JSON}
    assert expected | {ROBUSTNESS_CONCEPTS, S.REPORT_FILE, S.MANIFEST_FILE, S.SUMMARY_FILE} <= set(found)
    for name in found:
        artifact = RUN_ARTIFACTS[name]
        path = run / name
        if artifact.kind == "json":
            doc = json.loads(path.read_text(encoding="utf-8"))
            assert next(iter(doc)) == "format_version", name
            assert artifact.model is not None
            assert read_document(path, artifact.model).format_version == artifact.model.version, name
        elif artifact.kind == "parquet":
            assert pq.read_schema(path).names, name
        else:
            assert path.stat().st_size > 0, name
    report = run.report.read_text(encoding="utf-8")
    assert "Robustness" in report and "validation" in report.lower()  # rebuilt after the later steps


def test_the_manifest_lists_the_post_publish_steps(built_run: Path) -> None:
    steps = RunDir(built_run).steps()
    names = [s["step"] for s in steps]
    assert [n for n in names if n != "report"] == [s for s in STEPS if s != "report"]
    assert names[0] == "report" and names[-1] == "report"  # each later step rebuilt the report
    by = {s["step"]: s for s in steps}
    assert set(by["describe"]["files"]) >= {S.DESCRIPTIONS_FILE, S.THEMES_FILE, S.WEAKNESSES_FILE}
    assert set(by["explain"]["files"]) >= {S.EXPLANATIONS_FILE, S.DESCRIPTIONS_FILE, S.THEMES_FILE}
    assert by["validate"]["files"] == [S.VALIDATE_FILE]
    assert set(by["robustness"]["files"]) == {ROBUSTNESS_JSON, ROBUSTNESS_CONCEPTS}
    assert all(s["at"] for s in steps)


def test_unknown_names_and_newer_versions_are_refused(full_run: Path) -> None:
    run = RunDir(full_run)
    with pytest.raises(CgRayError, match="not an artifact"):
        run.file("notes.txt")
    themes = run / S.THEMES_FILE
    themes.write_text(json.dumps({**json.loads(themes.read_text()), "format_version": 99}))
    with pytest.raises(InputError, match=r"themes\.json.*newer|newer.*themes\.json"):
        run.read_json(S.THEMES_FILE)


def test_an_update_that_fails_changes_nothing(full_run: Path) -> None:
    run = RunDir(full_run)
    before = {name: (run / name).read_bytes() for name in (S.DESCRIPTIONS_FILE, S.THEMES_FILE, S.MANIFEST_FILE)}

    def broken(path: Path) -> None:
        path.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run.update("describe", {S.DESCRIPTIONS_FILE: b"new", S.THEMES_FILE: broken})
    assert {name: (run / name).read_bytes() for name in before} == before
    assert sorted(p.name for p in full_run.iterdir() if p.name.startswith(".")) == []
    with pytest.raises(InputError, match="themes"):  # a JSON artifact must load through its model
        run.update("describe", {S.THEMES_FILE: {"themes": []}})
    assert {name: (run / name).read_bytes() for name in before} == before


def test_refresh_rebuilds_an_existing_report_and_leaves_a_run_without_one_alone(full_run: Path) -> None:
    report = full_run / S.REPORT_FILE
    report.write_text("stale")
    assert refresh_report(RunDir(full_run)) == report and report.read_text() != "stale"
    assert RunDir(full_run).steps()[-1]["step"] == "report"
    report.unlink()
    assert refresh_report(RunDir(full_run)) is None and not report.exists()
