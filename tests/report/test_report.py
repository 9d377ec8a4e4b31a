"""`cg-ray report`: a self-contained offline HTML report of a run directory."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.rows import open_rows
from cg_ray.cli import main
from cg_ray.report.examples import salient_rows
from cg_ray.report.html import UI_DIR as UI
from tests.report.runs import synthetic_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return synthetic_run(tmp_path_factory.mktemp("report"))


def embedded(run_dir: Path) -> dict:
    """The run's documents embedded in report.html (what the app draws), parsed as the browser parses them."""
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="cg-ray-run" data-view="run">(.*?)</script>', page, re.S)
    assert found, "no embedded run documents"
    return json.loads(found.group(1))


def test_report_shows_validation_when_given(run_dir: Path, tmp_path: Path) -> None:
    rows = run_dir / S.ROWS_FILE
    val = tmp_path / "val"
    assert main(["validate", "--rows", str(rows), "--out", str(val), "--bootstrap", "50", "--random", "10"]) == 0
    assert main(["report", str(run_dir), "--validate", str(val / S.VALIDATE_FILE)]) == 0
    validation = embedded(run_dir)["validation"]
    written = json.loads((val / S.VALIDATE_FILE).read_text())
    assert validation["lift"] == written["lift"] and validation["baselines"].keys() == {"paper", "random"}
    # validate's null check (3 seeds by default): findings on whole groups' scores permuted within the adjusted
    # cells, counting every kind beyond those fields
    text = validation["null_check_text"]
    assert re.fullmatch(
        r"Null check: whole groups' scores permuted within benchmark cells, "
        r"3 seeds: \d+, \d+, \d+ confirmed findings beyond benchmark \(failure modes, concepts, slices on other "
        r"fields\)",
        text,
    )
    assert main(["report", str(run_dir)]) == 0  # back to the plain report for the other tests
    assert embedded(run_dir)["validation"] is None


def test_report_is_the_app_with_the_run_embedded_and_offline(run_dir: Path) -> None:
    from cg_ray.report.findings import power_text

    assert main(["report", str(run_dir)]) == 0
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    view = embedded(run_dir)
    summary = json.loads((run_dir / S.SUMMARY_FILE).read_text())
    assert view["summary"]["rankings"] == summary["rankings"] and view["summary"]["suite"] == summary["suite"]
    worst = summary["rankings"]["worst_model"][0]
    assert worst["label"] and str(worst["concept_id"]) in view["details"]  # JSON keys: its examples travel along
    assert view["concepts"]["label"][worst["concept_id"]] == worst["label"]
    weaknesses = pq.read_table(run_dir / S.WEAKNESSES_FILE).to_pylist()
    first = view["profiles"]["weaknesses"]["items"][0]
    for key in ("concept_id", "X_model", "X_model_low", "X_model_high", "adjusted_gap", "n_rows"):
        assert first[key] == weaknesses[0][key], key  # the numbers the app draws are the run's, exactly
    # failure modes and slices judged held out, in the CLI's words
    modes = view["profiles"]["failure_modes"]
    assert modes["judged"].startswith("chosen on one half of the rows and tested on the other, over 10 grouped splits")
    assert modes["judged"].endswith(
        "confirmed when the splits' q ≤ 10% (their median q × 2; measured: realised FDR ≤ 2.5% at fdr 10% over 400 "
        "simulated suites per setting, 0–15 real effects)"
    )
    judged = summary["profile"]["beyond"]["judgement"]
    assert modes["judgement"] == judged and judged["decision"].startswith("confirmed ⇔ q ≤ fdr")
    assert judged["mde_by_size"] and all(0 < s["mde"] < 1 for s in judged["mde_by_size"])
    for m in modes["items"]:  # every candidate with its power, said as the CLI says it
        assert 1 <= m["splits_selected"] <= 10 and m["measured"].endswith(
            f"chosen by {m['splits_selected']} of 10 splits"
        )
        assert m["power"] == ("" if m["confirmed"] or m["mde"] is None else power_text(m, "failure_modes"))
    assert any(m["power"].startswith("too few rows to settle below a residual of -") for m in modes["items"])
    assert "slices" in view["profiles"] and view["robustness"]["subsampling"]["repeats"] == 3
    # Everything inline: the app's scripts and style, no script or stylesheet fetched from anywhere.
    assert not re.search(r"<script[^>]+src=", page) and not re.search(r"<link[^>]+href=", page)
    for name in ("charts.js", "view.js", "app.js"):
        assert (UI / name).read_text(encoding="utf-8") in page
    scripts = len(re.findall(r"<script src=", (UI / "index.html").read_text(encoding="utf-8")))
    assert page.count("<script") == page.count("</script>") == 1 + scripts  # the data and the app's, none cut short
    assert '<section id="beyond"' in page and '<section id="robustness"' in page


def test_embedded_json_cannot_end_its_script(tmp_path: Path) -> None:
    from cg_ray.report.html import embedded_json, page

    doc = {"name": "</script><script>alert(1)</script>", "n": [1.5, None]}
    text = embedded_json(doc)
    assert "</" not in text and json.loads(text) == doc
    with pytest.raises(ValueError):
        embedded_json({"x": float("nan")})  # the documents are cleaned first: a NaN here is a bug
    html = page(doc, "t")
    scripts = len(re.findall(r"<script src=", (UI / "index.html").read_text(encoding="utf-8")))
    assert html.count("</script>") == 1 + scripts  # the document's, then the app's


def test_the_report_is_smaller_than_with_plotly(run_dir: Path) -> None:
    assert main(["report", str(run_dir)]) == 0
    assert (run_dir / "report.html").stat().st_size < 2 * 2**20  # plotly.js alone was 4.6 MiB


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


# ---- findings judged held out (issue #38), on a run directory written by hand in the new format: the
# documents here, their rendering in tests/report/test_report_browser.py


def test_profile_documents_carry_the_verdicts_in_the_cli_words(tmp_path: Path) -> None:
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.report.documents import profile
    from tests.report.judged_run import mode, slice_, write_run

    run_dir = write_run(
        tmp_path / "run",
        [mode(1, True, "draw"), mode(2, False, "pawn")],
        [slice_(1, True, "geometry"), slice_(2, False, "algebra")],
    )
    modes = profile(RunDir(run_dir), "failure_modes", 50)
    assert modes is not None and modes["n_confirmed"] == 1 and modes["tried"] == "61 candidates tried"
    assert modes["judged"] == (
        "chosen on one half of the rows and tested on the other, over 10 grouped splits (identical prompts, "
        "1,834 groups); confirmed when the splits' q ≤ 10% (their median q × 2; measured: realised FDR ≤ 2.5% at "
        "fdr 10% over 400 simulated suites per setting, 0–15 real effects)"
    )
    assert modes["judgement"]["decision"].startswith("confirmed ⇔ q ≤ fdr")
    assert modes["judgement"]["mde_by_size"][1] == {"n_rows": 100, "mde": 0.211}
    first, candidate = modes["items"]
    assert first["measured"] == "tested on 412 held-out rows (380 groups), chosen by 9 of 10 splits"
    assert first["power"] == ""  # confirmed: nothing left to detect
    assert candidate["measured"] == "tested on 90 held-out rows (80 groups), chosen by 4 of 10 splits"
    assert candidate["mde"] == 0.172 and candidate["power"] == (
        "too few rows to settle below a residual of -0.172 (its minimum detectable effect at 80% power)"
    )
    assert first["shares_text"] == "“draw” in 62% of its rows vs 8% of the same cells; “board” 40% vs 10%"
    example = first["examples"][0]
    assert [example["snippet"][a:b] for a, b in example["marks"]] == ["draw", "board"]  # its terms, marked
    slices = profile(RunDir(run_dir), "slices", 50)
    assert slices is not None and slices["tried"] == "240 candidates tried" and slices["items"][0]["suite_mean"] == 0.6
    assert slices["items"][1]["power"] == (
        "too few rows to settle below a difference from the other rows of -0.172 "
        "(its minimum detectable effect at 80% power)"
    )


def test_marked_snippets_mark_whole_words_as_the_tokeniser_reads_them() -> None:
    from cg_ray.report.documents import marked_snippet

    text = 'Would a person answer an issue? Is "kayak" a palindrome? [asy] draw [/asy]'
    got = marked_snippet(text, ["an", "is kayak", "[asy]"])
    marked = [got["snippet"][a:b] for a, b in got["marks"]]
    assert marked == ["an", 'Is "kayak', "[asy]"]  # never inside a longer word ("answer")
    assert marked_snippet(text, [])["marks"] == marked_snippet(text, ["  "])["marks"] == []
    long = "x " * 300 + "the draw here " + "y " * 300
    cut = marked_snippet(long, ["draw"])
    assert cut["snippet"].startswith("…") and cut["snippet"].endswith("…")
    assert [cut["snippet"][a:b] for a, b in cut["marks"]] == ["draw"]


def test_null_check_text() -> None:
    from cg_ray.report.findings import null_check_text

    check: dict[str, Any] = {
        "seeds": [0, 1, 2],
        "permuted_within": ["task"],
        "unit": "group",
        "confirmed": [
            {
                "seed": s,
                "failure_modes": 0,
                "slices": 0,
                "slices_beyond_adjusted": 0,
                "concepts": 0,
                "false_findings": 0,
            }
            for s in (0, 1, 2)
        ],
    }
    assert null_check_text(check) == (
        "Null check: whole groups' scores permuted within task cells, 3 seeds: 0, 0, 0 confirmed findings beyond "
        "task (failure modes, concepts, slices on other fields)"
    )
    assert null_check_text(None) == ""
    # Slices on the permuted-within fields alone stay real: not counted; every other kind is.
    check["confirmed"][1] |= {"slices": 4, "slices_beyond_adjusted": 1, "failure_modes": 1, "concepts": 1}
    check["confirmed"][1]["false_findings"] = 3
    assert "3 seeds: 0, 3, 0 confirmed findings beyond task" in null_check_text(check)
    # A validate.json of format 3 (rows permuted, modes and concepts counted) is said as it was made.
    old = {
        "seeds": [0],
        "permuted_within": ["task"],
        "confirmed": [{"seed": 0, "failure_modes": 1, "slices": 4, "concepts": 1}],
    }
    assert null_check_text(old) == (
        "Null check: scores permuted within task cells, 1 seeds: 2 confirmed findings (failure modes and concepts)"
    )


def test_power_is_said_in_the_finding_s_direction_and_never_as_too_few_rows_for_an_effect_the_other_way() -> None:
    from cg_ray.report.findings import power_text

    weak = {"confirmed": False, "mde": 0.172, "heldout_residual_low": -0.2, "heldout_residual_high": 0.05}
    assert power_text(weak, "failure_modes") == (
        "too few rows to settle below a residual of -0.172 (its minimum detectable effect at 80% power)"
    )
    assert power_text({**weak, "confirmed": True}, "failure_modes") == ""
    assert power_text({**weak, "mde": None}, "failure_modes") == ""
    strength = {"confirmed": False, "mde": 0.1, "heldout_residual_low": -0.02, "heldout_residual_high": 0.2}
    assert power_text(strength, "strengths").startswith("too few rows to settle above a residual of +0.100")
    # a slice whose whole held-out interval lies above the other rows' mean: no weakness to settle
    above = {"confirmed": False, "mde": 0.053, "low": 0.673, "high": 0.747, "suite_mean": 0.61}
    assert power_text(above, "slices").startswith("held out it lies the other way, its whole interval too: no weakness")


def test_the_next_step_probes_the_first_candidate_the_rows_could_not_settle() -> None:
    from cg_ray.report.findings import probe_command, probe_gap

    settled = {"rank": 1, "confirmed": True, "mde": 0.09, "heldout_residual_low": -0.3, "heldout_residual_high": -0.1}
    other_way = {"rank": 2, "confirmed": False, "mde": 0.1, "heldout_residual_low": 0.02, "heldout_residual_high": 0.2}
    untestable = {"rank": 3, "confirmed": False, "mde": None}
    open_ = {"rank": 4, "confirmed": False, "mde": 0.17, "heldout_residual_low": -0.2, "heldout_residual_high": 0.05}
    assert probe_gap([settled, other_way, untestable, open_]) == "mode:4"
    assert probe_command("my run", [settled, other_way, untestable, open_]) == "cg-ray probe 'my run' --gap mode:4"
    assert probe_command("run", [settled, other_way, untestable]) == ""
    assert probe_command("run", [{**open_, "confirmed": None}]) == ""  # a run made before held-out checks
