"""The report's section "What each benchmark leaves out of its scope": a small run scoped for real
(`cg-ray scope` against a reference of rows), then `cg-ray report`; the page embeds the scope's files in the
words users read, and draws them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts import layout as L
from cg_ray.cli import main
from tests.report.offline import offline_page
from tests.scope.test_scope_cli import LEFT_OUT, D, _rows
from tests.serve.test_browser import CHROMIUM


@pytest.fixture
def scoped(tmp_path: Path, write_rows: Callable[..., Path]) -> Path:
    rng = np.random.default_rng(0)
    path = write_rows(_rows("narrow", 300, rng, 0.0) + _rows("wide", 300, rng, 0.15), d_sae=D)
    ref = write_rows(_rows("traffic", 400, rng, 0.15), d_sae=D, name="traffic.rows.parquet")
    run = tmp_path / "run"
    assert main(["metrics", "--rows", str(path), "--out", str(run), "--min-rows", "5"]) == 0
    assert main(["scope", str(run), "--reference-rows", str(ref)]) == 0
    assert main(["report", str(run)]) == 0
    return run


def embedded_scope(run: Path) -> Any:
    page = (run / "report.html").read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="cg-ray-run" data-view="run">(.*?)</script>', page, re.S)
    assert found
    return json.loads(found.group(1))["scope"]


def test_the_report_leads_each_benchmark_with_its_gaps_in_words(scoped: Path) -> None:
    scope = embedded_scope(scoped)
    summary = json.loads((scoped / L.SCOPE_SUMMARY).read_text())
    assert scope["decision"] == summary["decision"]
    by = {b["benchmark"]: b for b in scope["benchmarks"]}
    assert [g["concept_id"] for g in by["narrow"]["gaps_shown"]] == [LEFT_OUT]
    assert by["wide"]["gaps_shown"] == []
    gap = by["narrow"]["gaps_shown"][0]
    row = next(r for r in pq.read_table(scoped / L.SCOPE_GAPS).to_pylist() if r["gap"])
    assert gap["evidence"].startswith(f"fires on {100 * row['reference_share']:.1f}%")
    assert "vs 0 of 300 rows here (<" in gap["evidence"]
    assert gap["label"] == f"concept {LEFT_OUT}"  # no label in this run: named by its id, never left blank


def test_a_run_without_scope_has_no_section(tmp_path: Path, write_rows: Callable[..., Path]) -> None:
    path = write_rows(_rows("only", 60, np.random.default_rng(3), 0.1), d_sae=D)
    assert main(["metrics", "--rows", str(path), "--out", str(tmp_path / "run"), "--min-rows", "5"]) == 0
    assert main(["report", str(tmp_path / "run")]) == 0
    assert embedded_scope(tmp_path / "run") is None


def test_an_augment_shows_under_its_benchmark_with_coverage_before_and_after(tmp_path: Path) -> None:
    from tests.augment.scripted import READER_FACTORY, build_run, writer_script
    from tests.describe.endpoint_server import serve

    run = build_run(tmp_path)
    assert main(["report", str(run)]) == 0
    with serve(writer_script("carry")) as url:
        args = [
            "--writer-endpoint",
            url,
            "--writer-model",
            "scripted-model",
            "--reader-factory",
            READER_FACTORY,
            "--items",
            "40",
        ]
        assert main(["augment", str(run), "--benchmark", "narrow", *args]) == 0
    augment = embedded_scope(run)["augment"]  # the augment refreshed the report
    summary = json.loads((run / L.AUGMENT_SUMMARY).read_text())
    before, after = summary["coverage"]["in_scope_coverage"]
    assert augment["benchmark"] == "narrow" and augment["coverage"].startswith(
        f"in-scope coverage {100 * before:.1f}% → {100 * after:.1f}%"
    )
    assert [g["states"] for g in augment["gaps"]] == [
        f"{g['state_before']} → {g['state_after']}" for g in summary["gaps"]
    ]
    # the row view before → after, as the CLI words it: both gaps filled, no theme left confirmed
    assert augment["rows"].startswith("uncovered share of ref:traffic: ") and augment["rows"].endswith(
        f"confirmed themes {len(summary['row_view']['before']['themes'])} → 0 (no longer: concept "
        + ", ".join(map(str, summary["row_view"]["before"]["themes"]))
        + ")"
    )
    items = pq.read_table(run / L.AUGMENT_ITEMS).to_pylist()
    for g in augment["gaps"]:
        concept = int(g["gap_id"].split(":")[1])
        kept = [i["prompt"] for i in items if i["concept_id"] == concept and i["dropped"] is None]
        assert g["example"] == kept[0][:400]  # the first kept, not chosen by anything else


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (scripts/setup.sh installs it)")
def test_the_section_renders_in_the_browser(scoped: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser, page, left, errors = offline_page(p, scoped / "report.html", "#scope-body table")
        expect(page.locator("#scope")).to_be_visible()
        expect(page.locator("#scope-note")).to_contain_text("Rule: in use when")
        rows = page.locator("#scope-body table.scope-table tbody tr")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text(f"concept {LEFT_OUT}")
        expect(page.locator("#scope-body")).to_contain_text("No in-scope gap")  # the benchmark without one
        expect(page.locator("#scope-body")).to_contain_text("Uncovered:")  # the row view leads each benchmark
        browser.close()
    assert left == [] and errors == []
