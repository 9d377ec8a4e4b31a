"""diff.html (`cg-ray diff`) and diff_models.html (`cg-ray diff-models`) in headless Chromium, opened from
file:// with every other request refused: each is the explorer's app drawing its embedded document, and the
numbers read from the page are those of the diff's own files (diff.json, diff.parquet, diff_models.parquet)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.cli import main
from cg_ray.compare.model_diff_job import diff_models
from cg_ray.compare.model_diff_outputs import HTML_FILE, TABLE_FILE, write_diff_models
from cg_ray.testing.fakes import word_concept
from tests.compare.test_diff_models_job import D_SAE, answers_file, config, fake_read, names_for
from tests.report.offline import offline_page
from tests.serve.test_browser import ARTIFACTS, CHROMIUM

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (scripts/setup.sh installs it)"),
    pytest.mark.slow,
]
# The run report's sections: none of them in a diff's page (no run is drawn there).
RUN_SECTIONS = ("overview", "beyond", "profile", "concepts", "relations", "arena", "start")


def _interval(value: float, low: float, high: float) -> str:
    return f"{value:+.3f} [{low:+.3f}, {high:+.3f}]"


def test_the_diff_page_renders_offline_with_the_diffs_numbers(planted_runs, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    a, b = planted_runs()
    out = tmp_path / "diff"
    assert main(["diff", str(a), str(b), "--out", str(out), "--resamples", "200", "--top", "3"]) == 0
    doc = json.loads((out / S.DIFF_JSON).read_text(encoding="utf-8"))
    rows = {r["concept_id"]: r for r in pq.read_table(out / S.DIFF_FILE).to_pylist()}
    top = doc["top_regressed"][0]
    assert top["concept_id"] == 9  # the planted regression
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        loaded: list[float] = []
        browser, page, left, errors = offline_page(p, out / S.DIFF_HTML, "#diff-table tr.regressed", loaded)
        expect(page.locator("#compare-analyses")).to_be_visible()
        expect(page.locator("#compare-models")).to_be_hidden()
        expect(page.locator("#compare-with")).to_be_hidden()  # the service's controls are not in a page
        for section in RUN_SECTIONS:
            expect(page.locator(f"#{section}")).to_be_hidden()
        expect(page.locator("#subtitle")).to_have_text("A → B")
        kpis = page.locator("#diff-kpis")
        expect(kpis).to_contain_text(f"{doc['counts']['paired']:,}paired rows")
        counts = doc["counts"]  # the bootstrap's counts, said to be descriptive with what chance alone gives
        expect(kpis).to_contain_text(
            f"{counts['confident_regressed']} / {counts['confident_improved']}regressed / improved concepts by "
            f"bootstrap interval (descriptive; ≈ {counts['expected_by_chance_per_direction']:g} each by chance)"
        )
        expect(page.locator("#diff-method")).to_contain_text("200 resamples (seed 0)")
        # The findings first: the planted changes confirmed held out, with the rule's interval and verdict.
        held = doc["heldout"]
        n = held["n_effects"]  # concepts on the same rows count once
        expect(kpis).to_contain_text(f"{n['regressed']} / {n['improved']}regressed / improved, confirmed held out")
        expect(page.locator("#diff-heldout-note")).to_contain_text(f"{held['splits']} splits")
        found = page.locator("#diff-heldout tbody tr.confirmed").first
        expect(found.locator("td").nth(0)).to_have_text("9")
        v = held["regressed"][0]["heldout"]
        expect(found.locator("td").nth(3)).to_contain_text(_interval(v["estimate"], v["low"], v["high"]))
        expect(found.locator("td").nth(3)).to_contain_text("✓ confirmed")
        expect(page.locator("#diff-table")).to_contain_text(f"Regressed most confidently ({len(doc['top_regressed'])})")
        expect(page.locator("#diff-table")).to_contain_text(f"Improved most confidently ({len(doc['top_improved'])})")
        # The planted concept's change with its interval, as diff.parquet holds it.
        first = page.locator("#diff-table tbody tr.regressed").first
        expect(first.locator("td").nth(0)).to_have_text("9")
        row = rows[9]
        delta = _interval(row["delta_X_model"], row["delta_X_model_low"], row["delta_X_model_high"])
        expect(first.locator("td").nth(2)).to_have_text(delta)
        expect(first.locator("td").nth(4)).to_have_text(f"{row['X_model_a']:.3f} → {row['X_model_b']:.3f}")
        # The forest plot: a point per listed concept.
        listed = len(doc["top_regressed"]) + len(doc["top_improved"])
        expect(page.locator("#diff-plot svg circle")).to_have_count(listed)
        # A row opens its rows that flipped, the first as diff.json lists it.
        first.click()
        flipped = top["examples"]["right_in_a_wrong_in_b"][0]
        expect(page.locator("#diff-detail")).to_contain_text("Right in A, wrong in B")
        expect(page.locator("#diff-detail .example").first).to_contain_text(
            f"{flipped['benchmark']}/{flipped['row_id']}"
        )
        page.screenshot(path=str(ARTIFACTS / "diff-page.png"), full_page=True)
        browser.close()
    assert not left, f"requests left the page: {left}"
    assert not errors, errors
    assert loaded[0] < 2.0, f"diff.html took {loaded[0]:.2f} s to render"


def test_the_diff_models_page_renders_offline_with_the_tables_numbers(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    doc = write_diff_models(diff_models(config(answers_file(tmp_path)), fake_read, names_for), tmp_path / "out")
    page_file = tmp_path / "out" / HTML_FILE
    table = pq.read_table(tmp_path / "out" / TABLE_FILE).to_pylist()
    certainly = word_concept("certainly", D_SAE)
    row = {r["concept_id"]: r for r in table}[certainly]
    hypothesis = doc["hypotheses"][0]
    assert hypothesis["concept_id"] == certainly
    conf = doc["confirmation"]
    with sync_playwright() as p:
        loaded: list[float] = []
        browser, page, left, errors = offline_page(p, page_file, "#models-table tbody tr[data-id]", loaded)
        expect(page.locator("#compare-models")).to_be_visible()
        expect(page.locator("#compare-analyses")).to_be_hidden()
        expect(page.locator("#models-analysis")).to_be_hidden()
        for section in RUN_SECTIONS:
            expect(page.locator(f"#{section}")).to_be_hidden()
        expect(page.locator("#models-note")).to_contain_text("A = big, B = small: 240 prompts compared")
        formed, confirmed = sum(conf["formed"].values()), sum(conf["confirmed"].values())
        expect(page.locator("#models-replication")).to_contain_text(
            f"one half of each of {conf['splits']} splits of the prompts and tested on the other: "
            f"{confirmed} of {formed} confirmed"
        )
        # The first hypothesis: its statement, its Δ on all prompts and held out (the rule's interval), its verdict.
        first_h = page.locator("#models-hyp-table tbody tr").first
        expect(first_h).to_contain_text(hypothesis["statement"])
        a, held = hypothesis["all"], hypothesis["heldout"]
        expect(first_h.locator("td.all")).to_have_text(_interval(a["delta"], a["low"], a["high"]))
        expect(first_h.locator("td.held")).to_have_text(_interval(held["estimate"], held["low"], held["high"]))
        expect(first_h).to_contain_text("✓ confirmed")
        with_interval = sum(
            h["heldout"]["low"] is not None and h["heldout"]["high"] is not None for h in doc["hypotheses"]
        )
        expect(page.locator("#models-hyp-plot svg circle")).to_have_count(len(doc["hypotheses"]) + with_interval)
        # The concept table (all of diff_models.parquet, largest |Δ| first): the planted word's row.
        first = page.locator("#models-table tbody tr").first
        expect(first).to_have_attribute("data-id", str(certainly))
        expect(first.locator("td").nth(4)).to_have_text(_interval(row["delta"], row["delta_low"], row["delta_high"]))
        expect(page.locator("#models-page")).to_have_text(f"1–{min(25, len(table))} of {len(table)}")
        page.check("#models-hypotheses")
        expect(page.locator("#models-table tbody tr")).to_have_count(sum(r["hypothesis"] is not None for r in table))
        page.fill("#models-search", "word 999999")
        expect(page.locator("#models-table tbody")).to_have_text("no concept")
        page.fill("#models-search", "")
        # A hypothesis opens its paired examples (kept in the page), A's answer marked.
        first.click()
        detail = page.locator("#models-detail")
        expect(detail).to_contain_text("In A's answer, not B's")
        expect(detail.locator(".answer.has-concept").first).to_contain_text("certainly")
        page.screenshot(path=str(ARTIFACTS / "diff-models-page.png"), full_page=True)
        browser.close()
    assert not left, f"requests left the page: {left}"
    assert not errors, errors
    assert loaded[0] < 2.0, f"diff_models.html took {loaded[0]:.2f} s to render"
