"""The report's section "Gaps tested on new items": a run probed for real (tests/probe/scripted_probe.py: a
scripted writer and model, the hashing reader), then `cg-ray report`; what the page embeds is the probe's
files, in the words users read."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.probe import ProbeResult, probe_summary
from cg_ray.cli import main
from cg_ray.report.probe import next_step, pairs_asked
from tests.describe.endpoint_server import serve
from tests.probe.scripted_probe import probe_config, script, write_run
from tests.report.offline import offline_page
from tests.serve.test_browser import ARTIFACTS, CHROMIUM

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_module")]


def probed_run(root: Path, pairs: int = 24) -> Path:
    """A small run with its two gaps probed (`cg-ray probe --config`), then its report."""
    run = write_run(root / "run")
    with serve(script()) as url:
        config = root / "probe.json"  # JSON is YAML: the CLI's --config reads it
        config.write_text(json.dumps(probe_config(url, seed=0, pairs=pairs)), encoding="utf-8")
        assert main(["probe", str(run), "--config", str(config), "--fresh"]) == 0
    assert main(["report", str(run)]) == 0
    return run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return probed_run(tmp_path_factory.mktemp("report-probe"))


def embedded_probe(run: Path) -> dict[str, Any]:
    page = (run / "report.html").read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="cg-ray-run" data-view="run">(.*?)</script>', page, re.S)
    assert found
    probe: dict[str, Any] = json.loads(found.group(1))["probe"]
    return probe


def test_the_report_shows_each_gap_probed_with_the_probes_numbers(run_dir: Path) -> None:
    probe = embedded_probe(run_dir)
    summary = json.loads((run_dir / L.PROBE_SUMMARY).read_text())
    assert probe["decision"] == summary["decision"] and probe["decision"].startswith("confirmed ⇔ q ≤ fdr")
    results = {r["gap_id"]: r for r in pq.read_table(run_dir / L.PROBE_RESULTS).to_pylist()}
    assert [g["gap_id"] for g in probe["gaps"]] == list(results) == ["mode:1", "mode:2"]
    for gap in probe["gaps"]:
        row = results[gap["gap_id"]]
        for key in ("verdict", "target_mean", "control_mean", "difference", "ci_low", "ci_high", "q_value",
                    "n_pairs", "pairs_written", "reader_pass_rate", "malformed", "near_copies"):  # fmt: skip
            assert gap[key] == row[key], key
        assert gap["run_said"] == f"a candidate of the run: effect {row['run_effect']:+.3f} over {row['run_rows']} rows"
        kept, written = row["n_pairs"], row["pairs_written"]
        read = f"reader passed {row['reader_passed']} of {row['reader_checked']}"
        read = read if row["reader_checked"] else "none read"
        assert gap["checks"].startswith(f"{kept} pairs kept of {written} written; {read}")
        assert f"{row['malformed']} malformed" in gap["checks"]
        assert f"{row['reader_checked'] - row['reader_passed']} by the reader" in gap["checks"]
        if row["difference"] is not None:
            assert gap["measured"].startswith(f"target {row['target_mean']:.3f} vs control {row['control_mean']:.3f}")
        assert (gap["next_step"] is not None) == (row["verdict"] == "unsettled")


def test_examples_are_answered_pairs_of_the_gap_target_beside_control(run_dir: Path) -> None:
    assert embedded_probe(run_dir)["gaps"][0]["n_pairs"] >= 2  # the planted gap keeps pairs to show
    items = pq.read_table(run_dir / L.PROBE_ITEMS).to_pylist()
    answered = {(r["pair_id"], r["role"]): r for r in items if r["dropped"] is None}
    for gap in embedded_probe(run_dir)["gaps"]:
        assert len(gap["examples"]) == min(2, gap["n_pairs"])
        word = {"mode:1": "zorblat", "mode:2": "quintal"}[gap["gap_id"]]
        for pair in gap["examples"]:
            for role in ("target", "control"):
                item = answered[(pair["pair_id"], role)]  # only answered items: a dropped one has no response
                assert item["gap_id"] == gap["gap_id"]
                assert pair[role] == {"prompt": item["prompt"], "response": item["response"], "score": item["score"]}
            assert word in pair["target"]["prompt"] and word not in pair["control"]["prompt"]


def test_the_section_sits_in_the_page_and_a_run_without_a_probe_has_none(run_dir: Path, tmp_path: Path) -> None:
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Gaps tested on new items" in page and "function drawProbe" in page
    plain = write_run(tmp_path / "plain")
    assert main(["report", str(plain)]) == 0
    assert embedded_probe(plain) is None


def test_an_unsettled_gap_says_how_many_pairs_to_write_and_how() -> None:
    gap = ProbeResult(gap_id="mode:3", verdict="unsettled", pairs_needed=90, pairs_written=40, n_pairs=30)
    step = next_step(gap, "my run", seed=4)
    # 90 kept at this probe's keep rate (30 of 40) needs 120 written; a new seed writes new pairs
    assert step == {
        "pairs": 120,
        "seed": 5,
        "command": "cg-ray probe 'my run' --gap mode:3 --pairs 120 --seed 5",
        "text": "write 120 pairs (about 90 kept: new pairs for 80% power in the run's next probe, at its share "
        "of fdr; this gap's earlier attempts stay, their verdicts final)",
    }
    assert next_step(replace(gap, verdict="confirmed", pairs_needed=None), "run", 0) is None


def test_the_pairs_asked_are_those_of_the_probes_whose_gaps_are_shown() -> None:
    summary = probe_summary({
        "config": {"pairs": 80},  # the latest probe's
        "probes": [{"probe": 1, "pairs": 40}, {"probe": 2, "pairs": 120}, {"probe": 3, "pairs": 80}],
    })  # fmt: skip
    one, two = ProbeResult(gap_id="mode:1", probe=1), ProbeResult(gap_id="mode:2", probe=3)
    # probe 2's gap was probed again by probe 3: its 120 is no longer any shown gap's
    assert pairs_asked(summary, [one, two]) == [40, 80]
    assert pairs_asked(summary, [two]) == [80]
    # a probe written before probes were kept has no "probes": its config says
    assert pairs_asked(probe_summary({"config": {"pairs": 24}}), [ProbeResult(gap_id="mode:1")]) == [24]


@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (scripts/setup.sh installs it)")
def test_the_section_renders_in_the_browser_with_the_rule_and_each_gaps_verdict(run_dir: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    results = pq.read_table(run_dir / L.PROBE_RESULTS).to_pylist()
    with sync_playwright() as p:
        browser, page, left, errors = offline_page(p, run_dir / "report.html", "#probe-table tbody tr")
        section = page.locator("#probe")
        expect(section).to_be_visible()
        expect(page.locator("#probe-rule")).to_contain_text("Decision: confirmed ⇔ q ≤ fdr")
        expect(page.locator("#probe-note")).to_contain_text("For each gap, 24 pairs were written")
        rows = page.locator("#probe-table tr.probe-gap")
        expect(rows).to_have_count(len(results))
        for i, r in enumerate(results):
            expect(rows.nth(i)).to_contain_text(r["gap_id"])
            expect(rows.nth(i)).to_contain_text(r["verdict"])
            expect(rows.nth(i).locator("td.num")).to_have_text(f"{r['n_pairs']} / {r['pairs_written']}")
        unsettled = [r for r in results if r["verdict"] == "unsettled"]
        if unsettled:  # the report gives the CLI command that settles it
            expect(section).to_contain_text(f"cg-ray probe run --gap {unsettled[0]['gap_id']} --pairs")
        page.locator("#probe details summary").first.click()
        expect(page.locator("#probe details .example").first).to_be_visible()
        ARTIFACTS.mkdir(exist_ok=True)
        section.screenshot(path=str(ARTIFACTS / "report-probe.png"))
        browser.close()
    assert not errors and not left
