"""report.html in headless Chromium (Debian's, driven by Playwright), opened from file:// with every other request
refused: every section renders from the embedded documents, the numbers read from the page are the run's, it
loads in under 2 s, and confirmed findings are kept apart from the candidates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.cli import main
from tests.report.offline import offline_page
from tests.report.runs import synthetic_run
from tests.serve.test_browser import ARTIFACTS, CHROMIUM

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (scripts/setup.sh installs it)"),
    pytest.mark.slow,
]
SECTIONS = (
    "overview",
    "beyond",
    "profile",
    "validation",
    "benchmarks",
    "concepts",
    "themes",
    "relations",
    "robustness",
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = synthetic_run(tmp_path_factory.mktemp("report-browser"))
    assert (
        main(["validate", "--rows", str(out / S.ROWS_FILE), "--out", str(out), "--bootstrap", "30", "--random", "5"])
        == 0
    )
    assert main(["report", str(out)]) == 0
    return out


def _offline_page(p: Any, html: Path, loaded: list[float] | None = None) -> tuple[Any, Any, list[str], list[str]]:
    """Chromium on the report from file://, every other request refused (tests/report/offline.py), until the
    concept table is drawn."""
    return offline_page(p, html, "#concept-table tbody tr", loaded)


def test_the_report_renders_every_section_offline_with_the_runs_numbers(run_dir: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    weakest = pq.read_table(run_dir / S.WEAKNESSES_FILE).to_pylist()[0]
    mode = pq.read_table(run_dir / S.FAILURE_MODES_FILE).to_pylist()[0]
    robustness = json.loads((run_dir / "robustness" / "robustness.json").read_text())
    concepts = pq.read_table(run_dir / S.CONCEPTS_FILE).to_pylist()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        loaded: list[float] = []
        browser, page, left, errors = _offline_page(p, run_dir / "report.html", loaded)
        for section in (*SECTIONS, "robustness"):
            expect(page.locator(f"#{section}")).to_be_visible()
        expect(page.locator("#start")).to_be_hidden()  # the service's controls are not in a report
        expect(page.locator("#compare")).to_be_hidden()
        expect(page.locator("#kpis")).to_contain_text(f"{len(concepts):,}")
        # the findings judged held out lead the figures; the paper's model-gap count says it is untested
        n = json.loads((run_dir / S.SUMMARY_FILE).read_text())["profile"]["beyond"]["judgement"]["confirmed"]
        counts = f"{n['failure_modes']} · {n['slices']} · {n['concepts']}"
        expect(page.locator("#kpis")).to_contain_text(f"{counts}confirmed held out: failure modes · slices · concepts")
        expect(page.locator("#kpis")).to_contain_text("model gaps (X_model < ε, in sample)")
        # The weakest concept's interval, as weaknesses.parquet holds it.
        first = page.locator("#profile-table tbody tr").first
        expect(first.locator("td").nth(1)).to_have_text(str(weakest["concept_id"]))
        interval = f"{weakest['X_model']:.3f} [{weakest['X_model_low']:.3f}, {weakest['X_model_high']:.3f}]"
        expect(first.locator("td.xmodel")).to_have_text(interval)
        # The first failure mode's held-out interval, as failure_modes.parquet holds it.
        table = "#modes-table" if mode["confirmed"] else "#modes-candidates-table"
        cell = page.locator(f"{table} tbody tr").first.locator("td.heldout")
        expect(cell).to_contain_text(
            f"{mode['heldout_residual']:+.3f} "
            f"[{mode['heldout_residual_low']:+.3f}, {mode['heldout_residual_high']:+.3f}]"
        )
        expect(page.locator("#robustness")).to_contain_text(f"{robustness['subsampling']['X_model_std_mean']:.4f}")
        expect(page.locator("#validation-table tbody tr")).to_have_count(3)
        expect(page.locator("#validation-lift svg")).to_be_visible()
        expect(page.locator("#hist-coverage svg rect").first).to_be_attached()
        expect(page.locator("#per-benchmark svg")).to_have_count(
            len(json.loads((run_dir / S.SUMMARY_FILE).read_text())["benchmarks"])
        )
        # The concept table sorts and searches in the page; a ranked concept opens with its examples.
        page.fill("#search", "planted hard")
        texts = page.locator("#concept-table tbody tr td:nth-child(2)").all_inner_texts()
        assert texts and all("planted hard" in t for t in texts)
        page.fill("#search", "")
        page.locator("#profile-table tbody tr").first.click()
        expect(page.locator("#detail-title")).to_contain_text(f"Concept {weakest['concept_id']}:")
        expect(page.locator("#best .example, #worst .example").first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        browser.close()
    assert not left, f"requests left the page: {left}"
    assert not errors, errors
    assert loaded[0] < 2.0, f"the report took {loaded[0]:.2f} s to render"


def _with_profiles(run_dir: Path, crossfit_run: Path, out: Path) -> Path:
    """The run's report with the hand-written run's failure modes, slices and weaknesses in their place."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.report.documents import profile, run_view
    from cg_ray.report.html import page

    view = run_view(RunDir(run_dir))
    for kind in ("failure_modes", "slices", "weaknesses"):
        view["profiles"][kind] = profile(RunDir(crossfit_run), kind, 50)
    out.write_text(page(view, "crossfit"), encoding="utf-8")
    return out


def test_confirmed_findings_come_first_and_candidates_sit_apart(run_dir: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from tests.report.judged_run import DECISION, INTERVAL, mode, slice_, weakness, write_run

    judged = write_run(
        tmp_path / "judged",
        [mode(1, True, "draw"), mode(2, False, "pawn")],
        [
            slice_(1, True, "geometry"),
            slice_(2, False, "algebra"),
            slice_(3, False, "counting", mean_score=0.71, low=0.67, high=0.75),  # held out above the others
        ],
        [weakness(1, 7, True), weakness(2, 9, None), weakness(3, 11, False)],
    )
    noise = write_run(tmp_path / "noise", [mode(1, False, "pawn")], [slice_(1, False, "algebra")], [])
    with sync_playwright() as p:
        browser, page, left, errors = _offline_page(p, _with_profiles(run_dir, judged, tmp_path / "judged.html"))
        expect(page.locator("#beyond-judged")).to_contain_text(
            "chosen on one half of the rows and tested on the other, over 10 grouped splits (identical prompts, "
            "1,834 groups); confirmed when the splits' q ≤ 10%"
        )
        # The one decision rule and what the intervals are, in the run's own sentences, beside the findings.
        rule = page.locator("#beyond-rule")
        expect(rule).to_contain_text(f"Decision: {DECISION}.")
        expect(rule).to_contain_text(f"Intervals: {INTERVAL}.")
        # What the run could detect: the MDE of a failure mode by its size, in the failure modes' note.
        power = page.locator("#modes-power")
        expect(power).to_contain_text(
            "a failure mode of 100 rows needs a residual of -0.211 to be confirmed 80% of the time"
        )
        expect(power.locator("tr").nth(0)).to_have_text("mode rows50100200")
        expect(power.locator("tr").nth(1)).to_have_text("residual needed (80% power)-0.297-0.211-0.150")
        expect(page.locator("#modes-confirmed")).to_have_text("Confirmed held out (1)")
        confirmed = page.locator("#modes-table tbody tr")
        expect(confirmed).to_have_count(1)
        expect(confirmed.first).to_contain_text("Rows with “draw”")
        expect(confirmed.first).to_contain_text("“draw” in 62% of its rows vs 8% of the same cells; “board” 40% vs 10%")
        expect(confirmed.first.locator("mark").first).to_have_text("draw")  # the example, its term marked
        held = confirmed.first.locator("td.heldout")
        expect(held).to_contain_text("-0.210 [-0.300, -0.120]")
        expect(held).to_contain_text("q=0.003")
        expect(held).to_contain_text("tested on 412 held-out rows (380 groups), chosen by 9 of 10 splits")
        expect(held.locator(".power")).to_have_count(0)  # confirmed: no power said
        expect(page.locator("#modes-table th")).to_have_count(6)  # no MDE column among the confirmed
        candidates = page.locator("#modes-candidates")
        expect(candidates.locator("summary")).to_contain_text(
            "Candidates — not confirmed: each with the smallest effect this run could confirm (MDE, 80% power)"
        )
        expect(candidates.locator("summary")).to_contain_text("1 (q > 0.1)")
        expect(candidates).not_to_contain_text("likely noise")
        expect(candidates.locator("tbody tr").first).to_be_hidden()  # collapsed until opened, greyed
        assert candidates.locator("table").evaluate("t => getComputedStyle(t).opacity") == "0.6"
        candidates.locator("summary").click()
        pawn = candidates.locator("tbody tr").first
        expect(pawn).to_contain_text("Rows with “pawn”")
        # Its power: the MDE column's number (the last column) and the sentence under its held-out residual.
        expect(candidates.locator("th").last).to_have_text("MDE (80% power)")
        expect(pawn.locator("td").last).to_have_text("-0.172")
        expect(pawn.locator("td.heldout")).to_contain_text("tested on 90 held-out rows (80 groups), chosen by 4 of 10")
        expect(pawn.locator("td.heldout .power")).to_have_text(
            "too few rows to settle below a residual of -0.172 (its minimum detectable effect at 80% power)"
        )
        # The next step for it: new items with matched controls; none under slices (the probe tests modes).
        expect(page.locator("#modes-next")).to_contain_text("cg-ray probe judged --gap mode:2")
        expect(page.locator("#slices-next")).to_be_hidden()
        expect(page.locator("#slices-table tbody tr").first).to_contain_text("task=geometry")
        expect(page.locator("#slices-table tbody tr").first.locator("td.heldout")).to_contain_text(
            "0.300 [0.250, 0.360]other rows 0.600"
        )
        algebra = page.locator("#slices-candidates-table tbody tr").first
        expect(algebra).to_contain_text("task=algebra")
        expect(algebra.locator("td.mde")).to_have_text("-0.172")
        expect(algebra.locator("td.heldout .power")).to_contain_text("too few rows to settle below a difference")
        # A candidate whose whole held-out interval lies above the other rows is no weakness "too few rows" missed.
        counting = page.locator("#slices-candidates-table tbody tr").nth(1)
        expect(counting.locator("td.heldout .power")).to_have_text(
            "held out it lies the other way, its whole interval too: no weakness here (the smallest this run could "
            "confirm: -0.172)"
        )
        rows = page.locator("#profile-table tbody tr")
        expect(rows.nth(0).locator("td").nth(5)).to_contain_text("-0.180 [-0.250, -0.100]✓ confirmed q=0.002")
        expect(rows.nth(1).locator("td").nth(5)).to_have_text("—")
        expect(rows.nth(2).locator("td").nth(5)).to_contain_text("candidate, q=0.500MDE -0.172")
        browser.close()
        browser, page, left2, errors2 = _offline_page(p, _with_profiles(run_dir, noise, tmp_path / "noise.html"))
        expect(page.locator("#modes-table tbody")).to_have_text(
            "No failure mode confirmed held out (61 candidates tried)."
        )
        expect(page.locator("#modes-confirmed")).to_have_text("")
        expect(page.locator("#slices-table tbody")).to_have_text("No slice confirmed held out (240 candidates tried).")
        expect(page.locator("#modes-candidates-table tbody tr").first).to_contain_text("Rows with “pawn”")
        browser.close()
    assert not (left or left2 or errors or errors2), (left, left2, errors, errors2)
