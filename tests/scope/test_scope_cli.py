"""`cg-ray scope` end to end on small rows: a concept the reference uses and one benchmark leaves out is its
gap, written with its evidence; bad inputs are clear errors that leave nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.layout import SCOPE_GAPS, SCOPE_ROWS, SCOPE_SUMMARY, RunDir
from cg_ray.cli import main

D = 64
LEFT_OUT = 7  # fires on 15% of the reference and of benchmark "wide", never on "narrow"


def _rows(benchmark: str, n: int, rng: np.random.Generator, left_out_share: float) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        ids = sorted(set(rng.choice(np.arange(10, D), size=6, replace=False).tolist()))
        if rng.random() < left_out_share:
            ids = sorted({*ids, LEFT_OUT})
        acts = rng.uniform(0.5, 1.5, size=len(ids)).astype(np.float32).tolist()
        out.append(
            {"row_id": f"{benchmark}-{i}", "benchmark": benchmark, "score": float(rng.random() < 0.5),
             "concept_ids": ids, "concept_acts": acts}
        )  # fmt: skip
    return out


@pytest.fixture
def run_dir(tmp_path: Path, write_rows: Callable[..., Path]) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    rows = _rows("narrow", 300, rng, 0.0) + _rows("wide", 300, rng, 0.15)
    path = write_rows(rows, d_sae=D)
    ref = write_rows(_rows("traffic", 400, rng, 0.15), d_sae=D, name="traffic.rows.parquet")
    assert main(["metrics", "--rows", str(path), "--out", str(tmp_path / "run"), "--min-rows", "5"]) == 0
    return tmp_path / "run", ref


def test_the_left_out_concept_is_narrows_gap_with_its_evidence(
    run_dir: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, ref = run_dir
    assert main(["scope", str(run), "--reference-rows", str(ref)]) == 0
    out = capsys.readouterr().out
    gaps = pq.read_table(RunDir(run).file(SCOPE_GAPS)).to_pandas()
    found = gaps[gaps["gap"]]
    assert set(zip(found["benchmark"], found["concept_id"], strict=True)) == {("narrow", LEFT_OUT)}
    row = found.iloc[0]
    assert row["missing"] and row["bench_rows"] == 0 and row["bench_n"] == 300
    assert row["reference_low"] > 0.1 and row["ratio_high"] < 0.5 and row["q_value"] <= 0.1
    summary = RunDir(run).read_json(SCOPE_SUMMARY)
    by = {b["benchmark"]: b for b in summary["benchmarks"]}
    assert by["narrow"]["gaps"] == 1 and by["wide"]["gaps"] == 0
    assert "concept 7" in out and "0 of 300 rows" in out
    assert RunDir(run).steps()[-1]["step"] == "scope"


def test_sibling_benchmarks_are_a_reference_too(run_dir: tuple[Path, Path]) -> None:
    run, _ = run_dir
    assert main(["scope", str(run), "--benchmark", "narrow", "--reference", "wide"]) == 0
    gaps = pq.read_table(RunDir(run).file(SCOPE_GAPS)).to_pandas()
    assert gaps.loc[gaps["gap"], "concept_id"].tolist() == [LEFT_OUT]
    assert set(gaps["reference"]) == {"wide"}


def test_a_second_scope_keeps_the_first_ones_other_pairs(run_dir: tuple[Path, Path]) -> None:
    run, ref = run_dir
    assert main(["scope", str(run), "--benchmark", "narrow", "--reference", "wide"]) == 0
    assert main(["scope", str(run), "--reference-rows", str(ref)]) == 0
    assert main(["scope", str(run), "--benchmark", "narrow", "--reference", "wide", "--ratio", "0.4"]) == 0
    summary = RunDir(run).read_json(SCOPE_SUMMARY)
    pairs = [(b["benchmark"], b["reference"]) for b in summary["benchmarks"]]
    assert sorted(pairs) == [("narrow", "ref:traffic"), ("narrow", "wide"), ("wide", "ref:traffic")]
    assert next(b for b in summary["benchmarks"] if b["reference"] == "wide")["rule"]["ratio"] == 0.4
    gaps = pq.read_table(RunDir(run).file(SCOPE_GAPS)).to_pandas()
    assert set(zip(gaps["benchmark"], gaps["reference"], strict=True)) == set(pairs)
    assert gaps.groupby(["benchmark", "reference"])["concept_id"].apply(lambda c: c.is_unique).all()
    coverage = pq.read_table(RunDir(run).file("scope/coverage.parquet")).to_pandas()
    assert len(coverage) == len(coverage.drop_duplicates(["benchmark", "reference"]))


def test_the_suite_pooled_is_compared_too(run_dir: tuple[Path, Path]) -> None:
    """narrow + wide together fire the left-out concept on about 7.5% of rows against the reference's 15%:
    not below half, so the suite as a whole does not leave it out; the summary has the suite's own row."""
    run, ref = run_dir
    assert main(["scope", str(run), "--reference-rows", str(ref), "--suite"]) == 0
    summary = RunDir(run).read_json(SCOPE_SUMMARY)
    by = {b["benchmark"]: b for b in summary["benchmarks"]}
    assert by["(suite)"]["rows"] == 600 and by["narrow"]["gaps"] == 1
    gaps = pq.read_table(RunDir(run).file(SCOPE_GAPS)).to_pandas()
    suite = gaps[(gaps["benchmark"] == "(suite)") & (gaps["concept_id"] == LEFT_OUT)]
    assert len(suite) == 1 and 0.05 < suite["bench_share"].iloc[0] < 0.10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--benchmark", "nope", "--reference", "wide"], "no benchmark 'nope'"),
        (["--benchmark", "narrow"], "no reference"),
        (["--benchmark", "wide", "--reference", "wide"], "as both"),
        (["--reference-rows", "missing.parquet"], "no such rows file"),
    ],
)
def test_bad_inputs_are_clear_errors_that_write_nothing(
    run_dir: tuple[Path, Path], args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = run_dir
    before = sorted(p.name for p in run.iterdir())
    assert main(["scope", str(run), *args]) != 0
    assert "cg-ray scope: error:" in (err := capsys.readouterr().err) and message in err
    assert sorted(p.name for p in run.iterdir()) == before
    assert not (run / S.SCOPE_DIR).exists()


def test_a_reference_read_by_another_sae_is_refused(
    run_dir: tuple[Path, Path], write_rows: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = run_dir
    other = write_rows(_rows("traffic", 50, np.random.default_rng(1), 0.1), d_sae=D * 2, name="other.rows.parquet")
    assert main(["scope", str(run), "--reference-rows", str(other)]) != 0
    assert "other.rows.parquet: d_sae 128 differs" in capsys.readouterr().err
    assert not (run / S.SCOPE_DIR).exists()


def _manifest(rows: Path, model: str) -> None:
    from cg_ray.activations.recorded import manifest_path

    reader = {"model": model, "layer": 20, "sae": {"spec": "default", "d_sae": D}}
    manifest_path(rows).write_text(json.dumps({"format_version": 1, "reader": reader}), encoding="utf-8")


def test_a_reference_read_by_another_reader_model_is_refused_naming_it(
    tmp_path: Path, write_rows: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(3)
    rows = write_rows(_rows("narrow", 100, rng, 0.0), d_sae=D)
    _manifest(rows, "smollm2-135m-instruct")
    assert main(["metrics", "--rows", str(rows), "--out", str(tmp_path / "run"), "--min-rows", "5"]) == 0
    ref = write_rows(_rows("traffic", 100, rng, 0.15), d_sae=D, name="traffic.rows.parquet")
    _manifest(ref, "gemma-2-2b")
    capsys.readouterr()
    assert main(["scope", str(tmp_path / "run"), "--reference-rows", str(ref)]) == 2
    err = capsys.readouterr().err
    assert "traffic.rows.parquet" in err and "reader model 'gemma-2-2b'" in err
    assert not RunDir(tmp_path / "run").has(SCOPE_SUMMARY)  # nothing written


def test_the_row_view_leads_and_every_reference_row_has_its_density_ratio(
    run_dir: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, ref = run_dir
    assert main(["scope", str(run), "--reference-rows", str(ref)]) == 0
    out = capsys.readouterr().out
    assert out.index("uncovered:") < out.index(" concepts in use; ")
    summary = RunDir(run).read_json(SCOPE_SUMMARY)
    assert summary["format_version"] == 2
    view = {b["benchmark"]: b["row_view"] for b in summary["benchmarks"]}
    assert set(view) == {"narrow", "wide"}
    assert view["wide"]["confirmed"] is False  # wide asks the left-out concept as often as the reference
    rows = pq.read_table(RunDir(run).file(SCOPE_ROWS)).to_pandas()
    assert len(rows[rows["benchmark"] == "narrow"]) == 400  # every reference row, once per comparison
    assert rows["density_ratio"].between(0, np.inf).all()
    # each benchmark's score on the reference's mix: the run's one model, its plain mean that of its rows
    weighed = {b["benchmark"]: b["reweighted"] for b in summary["benchmarks"]}
    scores = pq.read_table(RunDir(run).rows, columns=["benchmark", "score"]).to_pandas()
    for name in ("narrow", "wide"):
        (model,) = weighed[name]["models"]
        assert model["plain"] == pytest.approx(scores[scores["benchmark"] == name]["score"].mean())
        assert model["low"] < model["reweighted"] < model["high"] and model["n_eff"] > 0
    assert "scores as the reference's mix would weigh them, on its " in out
