"""Where a finding is shown, whether it holds under other readers (`cg-ray sensitivity`, issue #51): the
"holds under" line of `cg-ray metrics`, the report's section "Does another reader find the same?" and its
column on the findings tables, and `read_run(...).sensitivity`. sensitivity/ is written by hand here against
its tables' schemas (cg_ray.sensitivity.tables), so a column the command adds or drops breaks these tests too;
a run without it shows none of it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.cli import main
from cg_ray.report.sensitivity import annotate, holds_under, read_sensitivity
from cg_ray.sensitivity.tables import FINDINGS_SCHEMA, PAIRS_SCHEMA
from tests.report.judged_run import mode, slice_, weakness, write_run
from tests.serve.test_browser import CHROMIUM

A, B = "l20-seed7", "l13"  # the other readers, in the summary's order
RULE = "replicates: a confirmed finding of the other reader covers ≥ 50% of its rows (Jaccard ≥ 0.3)"
# (finding, reader, status): mode:1 replicates under A, not under B; mode:2 partly under A; slice:1 not compared.
STATUSES = [
    ("mode:1", B, S.NOT_FOUND),  # B's row first: the line still lists the readers in the summary's order
    ("mode:1", A, S.REPLICATES),
    ("mode:2", A, S.PARTLY),
    ("mode:2", B, S.NOT_FOUND),
    ("concept:7", A, S.REPLICATES),
    ("concept:7", B, S.PARTLY),
]


def _finding(key: str, reader: str, status: str) -> dict[str, Any]:
    found = status != S.NOT_FOUND
    kind = {"mode": "failure_mode", "concept": "concept"}[key.split(":")[0]]
    return {
        "kind": kind,
        "finding": key,
        "description": f"the run's {key}",
        "n_rows": 500,
        "reader": reader,
        "status": status,
        "match": f"mode:{3 if status == S.PARTLY else 1}" if found else None,
        "match_description": "Rows with “draw” and “board”" if found else None,
        "jaccard": (0.62 if status == S.REPLICATES else 0.21) if found else 0.0,
        "covered": (0.71 if status == S.REPLICATES else 0.3) if found else 0.0,
        "effect": -0.18,
        "effect_low": -0.25,
        "effect_high": -0.1 if found else 0.02,
        "effect_confirmed": found,
    }


def _pair(reader: str, layer: int) -> dict[str, Any]:
    return {
        "reader_a": "l20",
        "reader_b": reader,
        "method": "decoder cosine (same layer)" if layer == 20 else "activation correlation",
        "layer_a": 20,
        "layer_b": layer,
        "d_sae_a": 4608,
        "d_sae_b": 4608 if layer == 20 else 2304,
        "shared_05": 0.81,
        "shared_07": 0.55,
        "shared_09": 0.12,
        "median_similarity": 0.74,
        "n_matched": 3120,
        "spearman_X_model": 0.66,
        "spearman_X_bench": 0.91,
        "top_rows_jaccard": 0.43,
        "confirmed_a": 3,
        "confirmed_b": 2,
    }


def write_sensitivity(run: Path) -> None:
    """RUN/sensitivity/ as `cg-ray sensitivity RUN --reader l20-seed7 --reader l13` lays it out (a step of the
    published run: recorded in its manifest.json)."""
    findings = pa.Table.from_pylist([_finding(*s) for s in STATUSES], schema=FINDINGS_SCHEMA)
    pairs = pa.Table.from_pylist([_pair(A, 20), _pair(B, 13)], schema=PAIRS_SCHEMA)
    readers = [
        {"name": name, "sae": f"sae-{name}", "layer": layer, "d_sae": 4608, "rows": 1000, "seconds": 12.5}
        | {"resumed": False, "statuses": {S.REPLICATES: 1, S.PARTLY: 1, S.NOT_FOUND: 1}}
        for name, layer in ((A, 20), (B, 13))
    ]
    reader = {"name": "l20", "sae": "sae-l20", "layer": 20, "d_sae": 4608}
    doc = {"run": run.name, "reader": reader, "readers": readers, "rule": RULE, "seconds": 30.0}
    files = {L.SENSITIVITY_FINDINGS: findings, L.SENSITIVITY_PAIRS: pairs, L.SENSITIVITY_SUMMARY: doc}
    RunDir(run).update("sensitivity", files, {"readers": [A, B]})


def judged_run(path: Path) -> Path:
    """A hand-written run: two failure modes (one confirmed), a slice, a confirmed weak concept (7)."""
    modes = [mode(1, True, "draw"), mode(2, False, "pawn")]
    return write_run(path, modes, [slice_(1, True, "geometry")], [weakness(1, 7, True)])


@pytest.fixture
def sensitive(tmp_path: Path) -> Path:
    run = judged_run(tmp_path / "run")
    write_sensitivity(run)
    return run


def test_holds_under_lists_each_reader_with_its_mark_in_the_summarys_order(sensitive: Path) -> None:
    s = read_sensitivity(RunDir(sensitive))
    assert s is not None and s.readers == [A, B]
    assert holds_under(s, "mode:1") == f"{A} ✓, {B} ✗"
    assert holds_under(s, "mode:2") == f"{A} ~, {B} ✗"
    assert holds_under(s, "concept:7") == f"{A} ✓, {B} ~"
    assert holds_under(s, "slice:1") is None  # not compared: nothing said
    assert holds_under(None, "mode:1") is None
    # a strong concept is compared as concept:ID too; coverage gaps carry no verdict and are never compared
    strong, gap = [{"rank": 1, "concept_id": 7}], [{"rank": 1, "concept_id": 7}]
    annotate(s, "strengths", strong)
    annotate(s, "coverage_gaps", gap)
    assert strong[0]["holds_under"] == f"{A} ✓, {B} ~" and "holds_under" not in gap[0]


def test_a_run_without_sensitivity_reads_none(tmp_path: Path) -> None:
    assert read_sensitivity(RunDir(judged_run(tmp_path / "run"))) is None


def _printed(run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    from cg_ray.cli.metrics import print_findings

    print_findings(RunDir(run))
    return capsys.readouterr().out


def test_the_cli_ends_each_finding_line_with_where_it_holds(tmp_path: Path, capsys) -> None:
    run = judged_run(tmp_path / "run")
    before = _printed(run, capsys)
    assert "holds under" not in before
    write_sensitivity(run)
    after = _printed(run, capsys)
    lines = after.splitlines()
    draw = next(line for line in lines if "Rows with “draw”" in line)
    assert draw.endswith(f"  holds under: {A} ✓, {B} ✗")
    pawn = next(line for line in lines if "candidate" in line and "Rows with “pawn”" in line)
    assert pawn.endswith(f"  holds under: {A} ~, {B} ✗")
    concept = next(line for line in lines if "concept 7" in line)
    assert concept.endswith(f"  holds under: {A} ✓, {B} ~")
    assert not any("holds under" in line for line in lines if "task=geometry" in line)  # not compared
    # every other byte as it was without sensitivity/
    assert re.sub(r"  holds under: [^\n]*", "", after) == before


def test_the_profiles_carry_holds_under_only_where_sensitivity_ran(tmp_path: Path) -> None:
    from cg_ray.report.documents import profile

    run = judged_run(tmp_path / "run")
    plain = {kind: profile(RunDir(run), kind, 50) for kind in ("failure_modes", "slices", "weaknesses")}
    assert not any("holds_under" in item for p in plain.values() for item in (p or {})["items"])
    write_sensitivity(run)
    modes = profile(RunDir(run), "failure_modes", 50)
    assert modes is not None
    assert [m["holds_under"] for m in modes["items"]] == [f"{A} ✓, {B} ✗", f"{A} ~, {B} ✗"]
    slices = profile(RunDir(run), "slices", 50)
    assert slices is not None and slices["items"][0]["holds_under"] is None
    weak = profile(RunDir(run), "weaknesses", 50)
    assert weak is not None and weak["items"][0]["holds_under"] == f"{A} ✓, {B} ~"


def test_the_section_view_says_each_status_with_its_evidence(sensitive: Path) -> None:
    from cg_ray.report.sensitivity import sensitivity_view

    view = sensitivity_view(RunDir(sensitive))
    assert view is not None and view["rule"] == RULE and view["total"] == 3
    assert [r["statuses_text"] for r in view["readers"]] == ["1 replicates, 1 partly, 1 not found"] * 2
    first, second = view["pairs"]
    assert (first["reader_b"], first["shared"], first["layers"]) == (A, "81% / 55% / 12%", "20 → 20")
    assert (second["layers"], second["widths"], second["confirmed"]) == ("20 → 13", "4,608 → 2,304", "3 → 2")
    mode1 = view["findings"][0]
    assert mode1["finding"] == "mode:1" and mode1["holds_under"] == f"{A} ✓, {B} ✗"
    under_a, under_b = mode1["readers"]  # in the summary's order
    assert (under_a["reader"], under_a["mark"], under_a["status"]) == (A, "✓", S.REPLICATES)
    assert under_a["overlap"] == "mode:1 (Rows with “draw” and “board”): Jaccard 0.62, covers 71% of its rows"
    assert under_a["effect_text"] == (
        "its rows held out under this reader's splits: -0.180 [-0.250, -0.100], confirmed"
    )
    assert under_b["overlap"] == "no confirmed finding of this reader overlaps these rows"
    assert under_b["effect_text"].endswith("[-0.250, +0.020], not confirmed")


# ---- report.html: a small run measured for real, its findings replaced by the hand-written ones


def _embedded(run: Path) -> dict[str, Any]:
    page = (run / S.REPORT_FILE).read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="cg-ray-run" data-view="run">(.*?)</script>', page, re.S)
    assert found
    doc: dict[str, Any] = json.loads(found.group(1))
    return doc


@pytest.fixture
def measured(tmp_path: Path, write_rows: Callable[..., Path]) -> Path:
    from tests.scope.test_scope_cli import D, _rows

    path = write_rows(_rows("only", 80, np.random.default_rng(3), 0.1), d_sae=D)
    run = tmp_path / "run"
    assert main(["metrics", "--rows", str(path), "--out", str(run), "--min-rows", "5"]) == 0
    hand = judged_run(tmp_path / "hand")
    for name in (S.FAILURE_MODES_FILE, S.SLICES_FILE, S.WEAKNESSES_FILE):
        table = RunDir(hand).read_table(name)
        assert table is not None
        RunDir(run).write_table(name, table)
    return run


def test_the_report_has_the_section_and_the_column(measured: Path) -> None:
    assert main(["report", str(measured)]) == 0
    plain = _embedded(measured)
    assert "sensitivity" not in plain  # a run without it: the documents it had
    assert not any("holds_under" in item for p in plain["profiles"].values() for item in p["items"])
    write_sensitivity(measured)
    assert main(["report", str(measured)]) == 0
    doc = _embedded(measured)
    section = doc["sensitivity"]
    assert [p["reader_b"] for p in section["pairs"]] == [A, B]
    assert [f["finding"] for f in section["findings"]] == ["mode:1", "mode:2", "concept:7"]
    assert [m["holds_under"] for m in doc["profiles"]["failure_modes"]["items"]] == [f"{A} ✓, {B} ✗", f"{A} ~, {B} ✗"]
    assert doc["profiles"]["weaknesses"]["items"][0]["holds_under"] == f"{A} ✓, {B} ~"
    page = (measured / S.REPORT_FILE).read_text(encoding="utf-8")
    assert "Does another reader find the same?" in page and 'id="sensitivity-pairs"' in page
    # the service serves the same document (GET /v1/analyses/{id}/view)
    from cg_ray.report.documents import run_view
    from cg_ray.serve.api_types import RunView

    served = RunView.model_validate(run_view(RunDir(measured))).model_dump()
    assert served["sensitivity"]["findings"][0]["holds_under"] == f"{A} ✓, {B} ✗"


def test_read_run_exposes_the_tables(measured: Path) -> None:
    import cg_ray

    assert cg_ray.read_run(measured).sensitivity is None
    write_sensitivity(measured)
    s = cg_ray.read_run(measured).sensitivity
    assert s is not None and s.summary.rule == RULE and [r["name"] for r in s.summary.readers] == [A, B]
    assert list(s.findings.columns) == FINDINGS_SCHEMA.names and len(s.findings) == len(STATUSES)
    assert s.findings.query("finding == 'mode:1' and reader == @A")["status"].item() == S.REPLICATES
    assert list(s.pairs.columns) == PAIRS_SCHEMA.names and s.pairs["reader_b"].tolist() == [A, B]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (scripts/setup.sh installs it)")
def test_the_section_and_the_column_render_in_the_browser(measured: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from tests.report.offline import offline_page

    write_sensitivity(measured)
    assert main(["report", str(measured)]) == 0
    with sync_playwright() as p:
        browser, page, left, errors = offline_page(p, measured / S.REPORT_FILE, "#sensitivity-pairs tbody tr")
        expect(page.locator("#sensitivity")).to_be_visible()
        expect(page.locator("#sensitivity-rule")).to_have_text(f"Rule: {RULE}")
        expect(page.locator("#sensitivity-pairs tbody tr")).to_have_count(2)
        expect(page.locator("#sensitivity-pairs tbody tr").first).to_contain_text("81% / 55% / 12%")
        rows = page.locator("#sensitivity-findings tbody tr")
        expect(rows).to_have_count(3)
        expect(rows.first.locator("td").nth(1)).to_contain_text("✓ replicates")
        expect(rows.first.locator("td").nth(2)).to_contain_text("✗ not found")
        expect(page.locator("#modes-table th").last).to_have_text("holds under another reader")
        expect(page.locator("#modes-table tbody tr").first.locator("td.holds")).to_have_text(f"{A} ✓, {B} ✗")
        expect(page.locator("#modes-candidates-table th").last).to_have_text("MDE (80% power)")
        expect(page.locator("#profile-table tbody tr").first.locator("td.holds")).to_have_text(f"{A} ✓, {B} ~")
        browser.close()
    assert left == [] and errors == []
