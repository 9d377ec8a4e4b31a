"""`cg-ray report`: a self-contained offline HTML report of a run directory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.rows import open_rows
from cg_ray.cli import main
from cg_ray.report.examples import salient_rows
from cg_ray.synthetic import SyntheticSpec, write_synthetic_labels, write_synthetic_rows


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    spec = SyntheticSpec(rows_per_benchmark=250, d_sae=300, nnz=16)
    rows = write_synthetic_rows(tmp / "rows.parquet", spec)
    labels = write_synthetic_labels(tmp / "labels.csv", spec)
    out = tmp / "run"
    assert main(["metrics", "--rows", str(rows), "--labels", str(labels), "--out", str(out), "--min-rows", "5"]) == 0
    assert main(["robustness", "--rows", str(rows), "--out", str(out / "robustness"), "--repeats", "3"]) == 0
    return out


def test_report_shows_validation_when_given(run_dir: Path, tmp_path: Path) -> None:
    rows = run_dir / S.ROWS_FILE
    val = tmp_path / "val"
    assert main(["validate", "--rows", str(rows), "--out", str(val), "--bootstrap", "50", "--random", "10"]) == 0
    assert main(["report", str(run_dir), "--validate", str(val / S.VALIDATE_FILE)]) == 0
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<h2>Held-out validation</h2>" in page and "paper&#x27;s X_model ranking" not in page
    assert "paper's X_model ranking" in page and "random concepts" in page
    assert main(["report", str(run_dir)]) == 0  # back to the plain report for the other tests


def test_report_is_complete_and_offline(run_dir: Path) -> None:
    assert main(["report", str(run_dir)]) == 0
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    summary = json.loads((run_dir / S.SUMMARY_FILE).read_text())
    for heading in (
        "Benchmark gaps",
        "Model gaps",
        "Worst concepts",
        "Best concepts",
        "How the benchmarks relate",
        "Robustness",
    ):
        assert heading in page
    for bench in summary["jaccard"]["benchmarks"]:
        assert bench in page
    worst = summary["rankings"]["worst_model"][0]
    assert worst["label"] and worst["label"] in page
    # The weakness profile comes first, before the paper's plain ranking, with intervals and support.
    assert page.index("<h2>Weakness profile</h2>") < page.index("Worst concepts by plain X_model")
    first = pq.read_table(run_dir / S.WEAKNESSES_FILE).to_pylist()[0]
    assert f"{first['X_model']:.3f} <span class='ci'>[{first['X_model_low']:.3f}, {first['X_model_high']:.3f}]" in page
    assert "Held-out validation" not in page  # no validate.json here
    # Everything inline: no script or stylesheet is fetched from anywhere.
    assert not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"<link[^>]+href=\"?https?:", page)
    assert page.count("Plotly.newPlot") >= 6


def test_examples_are_the_most_salient_rows(run_dir: Path) -> None:
    rows = open_rows(run_dir / S.ROWS_FILE)
    table = pq.read_table(run_dir / S.ROWS_FILE).to_pylist()
    concept = json.loads((run_dir / S.SUMMARY_FILE).read_text())["rankings"]["best_model"][0]["concept_id"]
    expected = sorted(
        (
            (r["concept_acts"][r["concept_ids"].index(concept)], r["row_id"])
            for r in table
            if concept in r["concept_ids"]
        ),
        reverse=True,
    )[:3]
    got = salient_rows(rows, [concept], per_concept=3)[concept]
    assert [(pytest.approx(e.activation), e.row_id) for e in got] == [(a, rid) for a, rid in expected]


def test_examples_carry_text_when_rows_have_it(tmp_path: Path, write_rows) -> None:
    schema = S.ROWS_SCHEMA.append(pa.field("prompt", pa.string()))
    rows = [
        {"row_id": "1", "benchmark": "a", "score": 1.0, "concept_ids": [0], "concept_acts": [1.0], "prompt": "2+2?"},
        {"row_id": "2", "benchmark": "a", "score": 0.0, "concept_ids": [0], "concept_acts": [3.0], "prompt": "17*23?"},
    ]
    path = write_rows(
        table=pa.Table.from_pylist([{"model": "m", "n_tokens": 3, **r} for r in rows], schema=schema), d_sae=2
    )
    got = salient_rows(open_rows(path), [0, 1], per_concept=5)
    assert [(e.row_id, e.text) for e in got[0]] == [("2", "17*23?"), ("1", "2+2?")]
    assert got[1] == []


def test_report_of_a_non_run_directory(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert not (tmp_path / "report.html").exists()
