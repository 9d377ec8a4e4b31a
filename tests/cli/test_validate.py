"""`cg-ray validate` end to end: its `beyond` block is the run's own judgement (what `cg-ray metrics` confirms
on the same rows), its split keeps row groups whole, and it prints both with the null check."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.rows import open_rows
from cg_ray.cli import main
from cg_ray.config import MetricsConfig
from cg_ray.profile.judgement import judge_rows
from cg_ray.profile.validate_findings import MODE_COLUMNS, SLICE_COLUMNS, beyond_block
from tests.profile.planted_suites import write_suite

VERDICT = ("p_value", "q_value", "confirmed", "splits_selected", "n_heldout", "n_clusters", "mde")


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    """A suite of 500 questions answered 4 times each with a hidden property lowering 15% of them by 0.3:
    `cg-ray metrics` makes the run, `cg-ray validate` validates its rows into it."""
    tmp = tmp_path_factory.mktemp("validate")
    write_suite(tmp / "rows.parquet", 3, n=2000, hidden_share=0.15, hidden_drop=0.3, answers_per_question=4)
    run = tmp / "run"
    assert main(["metrics", "--rows", str(tmp / "rows.parquet"), "--out", str(run)]) == 0
    argv = ["--bootstrap", "50", "--random", "5", "--null-seeds", "1"]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):  # a module-scoped fixture cannot take capsys
        assert main(["validate", "--rows", str(run / S.ROWS_FILE), "--out", str(run), *argv]) == 0
    return run, json.loads((run / S.VALIDATE_FILE).read_text()), buffer.getvalue()


def test_the_beyond_block_is_what_the_run_confirmed(validated: tuple[Path, dict, str]) -> None:
    run, report, _ = validated
    beyond = report["beyond"]
    summary = json.loads((run / S.SUMMARY_FILE).read_text())["profile"]["beyond"]
    assert beyond["judgement"] == summary["judgement"]  # splits, groups, rule, candidates, confirmed counts, MDEs
    assert beyond["adjusted_for"] == summary["adjusted_for"]
    modes = [m for m in pq.read_table(run / S.FAILURE_MODES_FILE).to_pylist() if m["confirmed"]]
    assert modes and sorted(modes[0]["concept_ids"]) == [5, 6]  # something confirmed: the comparison says something
    assert beyond["failure_modes"] == [{k: m[k] for k in (*MODE_COLUMNS, *VERDICT)} for m in modes]
    slices = [s for s in pq.read_table(run / S.SLICES_FILE).to_pylist() if s["confirmed"]]
    assert slices and len(beyond["slices"]) == len(slices)
    for mine, theirs in zip(beyond["slices"], slices, strict=True):
        assert {k: mine[k] for k in (*SLICE_COLUMNS, *VERDICT) if k != "conditions"} == {
            k: theirs[k] for k in (*SLICE_COLUMNS, *VERDICT) if k != "conditions"
        }
        assert mine["conditions"] == json.loads(theirs["conditions"])
    confirmed = beyond["judgement"]["confirmed"]
    assert len(beyond["concepts"]) == confirmed["concepts"] >= 2
    assert sum(s["beyond_adjusted"] for s in beyond["slices"]) == confirmed["slices_beyond_adjusted"]
    # ... and equal to the judgement made directly on the rows with the same settings.
    direct = beyond_block(judge_rows(open_rows(run / S.ROWS_FILE), MetricsConfig()))
    assert json.loads(json.dumps(direct)) == beyond


def test_validate_into_its_run_reads_the_runs_judgement_and_an_older_run_is_judged_again(
    validated: tuple[Path, dict, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into the published run of the same rows and settings, `validate` reads the run's judgement (judging
    is not called); a run written before summary.json recorded every confirmed concept is judged again,
    to the same block."""
    import cg_ray.profile.judgement as judgement

    run, report, _ = validated
    copy = Path(shutil.copytree(run, tmp_path / "run"))
    argv = ["validate", "--rows", str(copy / S.ROWS_FILE), "--out", str(copy), "--overwrite", "--bootstrap", "50"]
    made = judgement.judge

    def not_again(*_: object, **__: object) -> None:
        raise AssertionError("the run's judgement was made again")

    monkeypatch.setattr(judgement, "judge", not_again)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--random", "5", "--null-seeds", "0"]) == 0
    assert json.loads((copy / S.VALIDATE_FILE).read_text())["beyond"] == report["beyond"]
    summary = json.loads((copy / S.SUMMARY_FILE).read_text())
    del summary["profile"]["beyond"]["judgement"]["confirmed_concepts"]
    (copy / S.SUMMARY_FILE).write_text(json.dumps(summary))
    calls: list[object] = []
    monkeypatch.setattr(judgement, "judge", lambda *a, **k: calls.append(a) or made(*a, **k))
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--random", "5", "--null-seeds", "0"]) == 0
    again = json.loads((copy / S.VALIDATE_FILE).read_text())["beyond"]
    assert len(calls) == 1 and again == report["beyond"]


def test_the_split_keeps_each_question_on_one_side(validated: tuple[Path, dict, str]) -> None:
    _, report, _ = validated
    split = report["split"]
    assert split["groups"] == {"rule": "identical prompts", "n_groups": 500}
    (math,) = split["strata"]
    assert math["n_groups_fit"] + math["n_groups_test"] == 500  # no question on both sides
    assert (math["n_fit"], math["n_test"]) == (4 * math["n_groups_fit"], 4 * math["n_groups_test"])
    assert math["n_test"] == 400


def test_validate_prints_the_confirmed_findings_and_the_null_check(validated: tuple[Path, dict, str]) -> None:
    _, report, out = validated
    assert "over 10 grouped splits (identical prompts, 500 groups)" in out
    assert f"confirmed: {report['beyond']['judgement']['confirmed']['failure_modes']} failure modes" in out
    assert "  slice type=geo & level=Level 5: vs the rest" in out
    check = report["null_check"]
    assert check["unit"] == "group" and check["groups"] == {"rule": "identical prompts", "n_groups": 500}
    assert (
        f"null check: whole groups' scores permuted within {' × '.join(check['permuted_within'])} cells "
        f"(identical prompts, 500 groups), 1 seeds: {check['false_findings']} false findings" in out
    )
