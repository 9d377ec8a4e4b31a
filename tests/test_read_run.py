"""`cg_ray.read_run`: a run directory read from a notebook through the public API only.

The run is made by the real commands, in process: `cg-ray example` (a seeded synthetic suite whose labels
state the planted truth) and `cg-ray metrics` with a false discovery rate and a number of splits other than
the defaults, so that reading them back shows they come from the run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import cg_ray
from cg_ray.api import FORMAT_VERSION
from cg_ray.cli import main
from cg_ray.errors import InputError, NotARunDirectory

FDR, SPLITS, PER_BENCHMARK = 0.2, 6, 200
VERDICT = ["p_value", "q_value", "confirmed", "splits_selected", "n_heldout", "n_clusters", "mde"]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The published run; tests that change a run work on a copy of it (`run_copy`)."""
    tmp = tmp_path_factory.mktemp("read_run")
    rows, labels = tmp / "rows.parquet", tmp / "labels.csv"
    example = ["--rows-per-benchmark", str(PER_BENCHMARK), "--d-sae", "300", "--nnz", "16"]
    assert main(["example", "--out", str(rows), "--labels-out", str(labels), *example]) == 0
    metrics = ["--labels", str(labels), "--fdr", str(FDR), "--splits", str(SPLITS), "--min-rows", "5"]
    assert main(["metrics", "--rows", str(rows), "--out", str(tmp / "run"), *metrics]) == 0
    return tmp / "run"


@pytest.fixture
def run_copy(made: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(made, tmp_path / "run"))


def test_a_notebook_reads_the_run_and_its_confirmed_findings(made: Path) -> None:
    run = cg_ray.read_run(made)
    assert (run.fdr, run.splits) == (FDR, SPLITS)
    assert run.format_version == FORMAT_VERSION
    assert run.n_rows == run.n_scored_rows == len(run.rows(columns=["row_id"])) == 6 * PER_BENCHMARK
    assert run.benchmarks["n_rows"].sum() == run.n_rows and len(run.benchmarks) == 6
    assert run.created is not None and run.created.tzinfo is not None

    every = run.findings(confirmed_only=False)
    assert set(VERDICT) <= set(every.columns) and {"kind", "finding", "estimate", "low", "high"} <= set(every.columns)
    assert every["confirmed"].eq(every["q_value"] <= run.fdr).all()
    # The held-out interval lies on the tested side of 0 exactly for the confirmed findings.
    strength = every["kind"] == "strength"
    beyond_zero = (strength & (every["low"] > 0)) | (~strength & (every["high"] < 0))
    assert beyond_zero.eq(every["confirmed"]).all()

    confirmed = run.findings()
    assert confirmed["confirmed"].all() and len(confirmed) == every["confirmed"].sum()
    counts = confirmed["kind"].value_counts()
    judged = run.judgement
    assert judged is not None and judged["fdr"] == FDR and judged["splits"] == SPLITS
    assert counts.get("slice", 0) == judged["confirmed"]["slices"]
    assert 0 < counts.get("failure_mode", 0) <= judged["confirmed"]["failure_modes"]
    assert counts.get("weakness", 0) + counts.get("strength", 0) <= judged["confirmed"]["concepts"]
    # The suite's labels state its planted truth: every confirmed weak concept or mode was planted hard.
    weak = confirmed[confirmed["kind"].isin(["weakness", "failure_mode"])]
    assert len(weak) and weak["finding"].str.contains("planted hard").all()
    assert confirmed.loc[confirmed["kind"] == "strength", "finding"].str.contains("planted easy").all()

    # One of them, plotted from its own table as a notebook would.
    modes = run.failure_modes
    assert modes is not None
    first = modes[modes["confirmed"]].iloc[0]
    assert first["heldout_residual_low"] <= first["heldout_residual"] <= first["heldout_residual_high"] < 0
    assert {"in_sample_residual", "mean_score", "expected_score"} <= set(modes.columns)
    assert first["description"] in set(weak["finding"])


def test_every_table_of_the_run_is_a_dataframe_and_absent_parts_are_none(made: Path) -> None:
    run = cg_ray.read_run(made)
    tables = {
        "concepts": run.concepts,
        "benchmark_concepts": run.benchmark_concepts,
        "weaknesses": run.weaknesses,
        "strengths": run.strengths,
        "coverage_gaps": run.coverage_gaps,
        "slices": run.slices,
        "failure_modes": run.failure_modes,
    }
    for name, table in tables.items():
        assert isinstance(table, pd.DataFrame) and len(table), name
    assert run.concepts is not None and len(run.concepts) == run.d_sae
    assert run.slices is not None and {"mean_in_sample", "suite_mean", *VERDICT} <= set(run.slices.columns)
    # `cg-ray metrics` alone: no manifest, no later steps, no reader on record (with why)
    assert run.manifest is None and run.steps == () and run.model is None
    assert not run.reader.known and run.reader.unknown
    absent = (run.probe, run.scope, run.augment, run.robustness, run.validation, run.themes, run.descriptions)
    assert all(part is None for part in absent) and run.sensitivity is None
    with pytest.raises(AttributeError):
        run.fdr = 0.5  # type: ignore[misc]


def test_a_later_step_shows_in_the_run(run_copy: Path) -> None:
    assert main(["scope", str(run_copy), "--benchmark", "logic", "--reference", "arithmetic"]) == 0
    run = cg_ray.read_run(run_copy)
    assert run.scope is not None and run.manifest is not None
    assert [s["step"] for s in run.steps] == ["scope"]
    gaps = run.scope.gaps
    assert {"benchmark", "reference", "concept_id", "bench_share", "reference_share", "q_value", "gap"} <= set(gaps)
    assert set(gaps["benchmark"]) == {"logic"} and set(gaps["reference"]) == {"arithmetic"}
    assert run.scope.summary.benchmarks[0]["benchmark"] == "logic"


def test_a_run_of_a_newer_format_is_refused_naming_the_file_and_both_versions(run_copy: Path) -> None:
    summary = run_copy / "summary.json"
    newer = FORMAT_VERSION + 1
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "format_version": newer}))
    with pytest.raises(InputError) as err:
        cg_ray.read_run(run_copy)
    message = str(err.value)
    assert str(summary) in message and f"format_version {newer}" in message
    assert f"({FORMAT_VERSION})" in message


def test_a_run_written_before_versions_and_verdicts_reads_as_it_is(run_copy: Path) -> None:
    summary = run_copy / "summary.json"
    doc = json.loads(summary.read_text())
    del doc["format_version"]
    summary.write_text(json.dumps(doc))
    slices = pq.read_table(run_copy / "slices.parquet")
    pq.write_table(slices.drop_columns(VERDICT), run_copy / "slices.parquet")
    run = cg_ray.read_run(run_copy)
    assert run.format_version == 0
    kinds = set(run.findings(confirmed_only=False)["kind"])
    assert "slice" not in kinds and "failure_mode" in kinds
    assert run.slices is not None and "confirmed" not in run.slices.columns


def test_a_format_2_run_reads_its_residual_columns_under_today_s_names(made: Path, run_copy: Path) -> None:
    """A run written before the residual columns were named for what they hold: its `residual` (held out in
    failure_modes.parquet, in sample in concepts.parquet and the profiles) reads as today's columns, with
    the same values, through read_run and every reader of RunDir.read_table (the report's and service's)."""
    from cg_ray.api.run import OLD_COLUMNS
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.report.documents import concept_details, profile
    from cg_ray.serve.results import concept_table

    summary = run_copy / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "format_version": 2}))
    for name, renamed in OLD_COLUMNS.items():
        table = pq.read_table(run_copy / name)
        back = {new: old for old, new in renamed.items()}
        assert set(back) <= set(table.column_names), name  # today's run holds every renamed column
        pq.write_table(table.rename_columns([back.get(c, c) for c in table.column_names]), run_copy / name)
    assert "residual" in pq.read_table(run_copy / "weaknesses.parquet").column_names  # the old layout on disk

    old, new = cg_ray.read_run(run_copy), cg_ray.read_run(made)
    assert old.format_version == 2
    for name in ("failure_modes", "concepts", "weaknesses", "strengths", "coverage_gaps"):
        pd.testing.assert_frame_equal(getattr(old, name), getattr(new, name), obj=name)
    pd.testing.assert_frame_equal(old.findings(confirmed_only=False), new.findings(confirmed_only=False))
    # Asked for by today's names, as a reader of a few columns asks.
    modes = RunDir(run_copy).read_table("failure_modes.parquet", ["rank", "heldout_residual", "in_sample_residual"])
    assert modes is not None and modes.column_names == ["rank", "heldout_residual", "in_sample_residual"]
    weak = profile(RunDir(run_copy), "weaknesses", 5)
    assert weak is not None and {"in_sample_residual", "heldout_residual"} <= set(weak["items"][0])
    # The service's concept table of a stored analysis, and the report's concept details, read it whole.
    page = concept_table(RunDir(run_copy), limit=1).items[0].model_dump()
    assert "in_sample_residual" in page and "residual" not in page
    assert "in_sample_residual" in concept_details(RunDir(run_copy), [0], examples=1)[0]


def test_a_path_that_is_not_a_run_is_named_with_what_is_missing(made: Path, tmp_path: Path) -> None:
    with pytest.raises(NotARunDirectory, match=r"summary\.json is missing") as err:
        cg_ray.read_run(tmp_path)
    assert str(tmp_path) in str(err.value)
    with pytest.raises(NotARunDirectory, match="no such directory"):
        cg_ray.read_run(tmp_path / "nowhere")
    with pytest.raises(NotARunDirectory, match="pass the run directory, not a table"):
        cg_ray.read_run(made / "rows.parquet")


def test_importing_cg_ray_reads_nothing_until_a_run_is_read() -> None:
    code = (
        "import sys, cg_ray\n"
        "before = {m for m in ('cg_ray.api', 'pandas', 'pyarrow') if m in sys.modules}\n"
        "cg_ray.read_run\n"
        "print(sorted(before), 'cg_ray.api' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "True"]
