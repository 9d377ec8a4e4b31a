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
    # validate's null check (3 seeds by default): findings on scores permuted within the adjusted cells
    assert re.search(r"Null check: scores permuted within benchmark cells, 3 seeds: \d+, \d+, \d+ confirmed", page)
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
    # failure modes and slices first, judged held out, the candidates apart
    assert page.index("<h2>Failure modes beyond the metadata</h2>") < page.index("<h2>Weakest slices</h2>")
    assert "chosen on one half of the rows (one row each, " in page
    assert "confirmed when both halves confirm at FDR 10%" in page
    assert page.count("<details class='candidates'>") >= 1 and "Other concept groups" not in page
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


# ---- findings judged held out (issue #31), on a run directory written by hand in the new format


def test_confirmed_modes_come_first_and_candidates_sit_apart(tmp_path: Path) -> None:
    from cg_ray.report.beyond import CANDIDATES_HEADING, failure_modes_section, slices_section
    from tests.report.crossfit_run import CROSSFIT, mode, slice_, write_run

    run_dir = write_run(
        tmp_path / "run",
        [mode(1, True, "draw"), mode(2, False, "pawn")],
        [slice_(1, True, "geometry"), slice_(2, False, "algebra")],
    )
    page = failure_modes_section(run_dir, 10, CROSSFIT)
    heading = page.index(f"<h3>{CANDIDATES_HEADING}</h3>")
    assert page.index("Rows with “draw”") < page.index("<details class='candidates'>") < heading
    assert heading < page.index("Rows with “pawn”") < page.index("</details>")
    assert "<h3>Confirmed held out (1)</h3>" in page
    # the confirmed mode: its held-out interval, q-value, what it was measured on, its terms' shares
    assert "-0.210 <span class='ci'>[-0.300, -0.120]</span>" in page and "q=0.003" in page
    assert "measured held out on 412 rows (380 groups) in 5 of 5 folds" in page
    assert "“draw” in 62% of its rows vs 8% of the same cells; “board” 40% vs 10%" in page
    assert "chosen on 4 of 5 folds of grouped rows (identical prompts, 1,834 groups)" in page
    assert "a random draw of the mode" in page and "<mark>draw</mark>" in page  # the example, its term marked
    assert "read the same" not in page and "variants" not in page  # look-alike modes are merged now
    slices = slices_section(run_dir, 10, CROSSFIT)
    assert slices.index("task=geometry") < slices.index(CANDIDATES_HEADING) < slices.index("task=algebra")
    assert "0.300 <span class='ci'>[0.250, 0.360]</span><div class='ex'>other rows 0.600</div>" in slices


def test_no_confirmed_finding_is_said_plainly(tmp_path: Path) -> None:
    from cg_ray.report.beyond import CANDIDATES_HEADING, failure_modes_section, slices_section
    from tests.report.crossfit_run import CROSSFIT, mode, slice_, write_run

    run_dir = write_run(tmp_path / "run", [mode(1, False, "pawn")], [slice_(1, False, "algebra")])
    page = failure_modes_section(run_dir, 10, CROSSFIT)
    assert "No failure mode confirmed held out (61 candidates tried)." in page
    assert "Confirmed held out" not in page and page.index(CANDIDATES_HEADING) < page.index("Rows with “pawn”")
    assert "No slice confirmed held out (240 candidates tried)." in slices_section(run_dir, 10, CROSSFIT)


def test_concept_tables_mark_confirmed_and_show_the_held_out_residual(tmp_path: Path) -> None:
    from cg_ray.report.profile import load_profile, profile_table
    from tests.report.crossfit_run import weakness, write_run

    entries = [weakness(1, 7, True), weakness(2, 9, None), weakness(3, 11, False)]
    run_dir = write_run(tmp_path / "run", [], [], entries)
    rows = profile_table(load_profile(run_dir), lambda _: "").split("<tr>")[2:]
    assert "-0.180 <span class='ci'>[-0.250, -0.100]</span>" in rows[0] and "✓ confirmed" in rows[0]
    assert "q=0.002" in rows[0] and "confirmed" not in rows[1] and "candidate, q=0.500" in rows[2]


def test_null_check_is_shown_from_validation_json() -> None:
    from cg_ray.report.profile import null_check_html, null_check_text

    check = {
        "seeds": [0, 1, 2],
        "permuted_within": ["task"],
        "confirmed": [{"seed": s, "failure_modes": 0, "slices": 0, "concepts": 0} for s in (0, 1, 2)],
    }
    assert (
        null_check_text(check) == "Null check: scores permuted within task cells, 3 seeds: 0, 0, 0 confirmed findings"
    )
    assert null_check_text(None) == "" and null_check_html(None) == ""
    check["confirmed"][1] |= {"slices": 4, "failure_modes": 1, "concepts": 1}  # slices stay real: not counted
    assert "3 seeds: 0, 2, 0 confirmed findings" in null_check_html(check)
