"""Where a finding is shown, whether other readers find it on the same rows (`cg-ray sensitivity`, issues #51,
#59): the "other readers" line of `cg-ray metrics`, the report's section "Does another reader find the same?"
(the overlap beside chance's, a near miss's q, slices apart, replication on fresh rows from the probe) and its
column on the findings tables, and `read_run(...).sensitivity`; a format 1 sensitivity/ reads under the new
names. sensitivity/ is written by hand here against
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
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.cli import main
from cg_ray.report.sensitivity import annotate, other_readers, read_sensitivity
from cg_ray.sensitivity.tables import FINDINGS_SCHEMA, PAIRS_SCHEMA
from tests.report.judged_run import mode, slice_, weakness, write_run
from tests.serve.test_browser import CHROMIUM

A, B = "l20-seed7", "l13"  # the other readers, in the summary's order
RULE = "found: a confirmed finding of the other reader covers ≥ 50% of its rows (Jaccard ≥ 0.3)"
# (finding, reader, status): mode:1 found by A, not by B; mode:2 partly by A; slice:1 found by both (a metadata
# rule: listed apart, nothing said beside it in the profiles).
STATUSES = [
    ("mode:1", B, S.NOT_FOUND),  # B's row first: the line still lists the readers in the summary's order
    ("mode:1", A, S.FOUND),
    ("mode:2", A, S.PARTLY),
    ("mode:2", B, S.NOT_FOUND),
    ("concept:7", A, S.FOUND),
    ("concept:7", B, S.PARTLY),
    ("slice:1", A, S.FOUND),
    ("slice:1", B, S.FOUND),
]


def _finding(key: str, reader: str, status: str) -> dict[str, Any]:
    found = status != S.NOT_FOUND
    kind = {"mode": "failure_mode", "concept": "concept", "slice": "slice"}[key.split(":")[0]]
    return {
        "kind": kind,
        "finding": key,
        "description": f"the run's {key}",
        "n_rows": 500,
        "reader": reader,
        "status": status,
        "match": f"mode:{3 if status == S.PARTLY else 1}" if found else None,
        "match_description": "Rows with “draw” and “board”" if found else None,
        "jaccard": (0.62 if status == S.FOUND else 0.21) if found else 0.0,
        "jaccard_by_chance": 0.04 if found else None,
        "covered": (0.71 if status == S.FOUND else 0.3) if found else 0.0,
        "best_q": 0.081 if key == "mode:1" and not found else (0.01 if found else None),
        "best_q_finding": "concept:12" if key == "mode:1" and not found else ("mode:1" if found else None),
        "own_estimate": -0.18,
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
        | {"resumed": False, "statuses": {S.FOUND: 1, S.PARTLY: 1, S.NOT_FOUND: 1}}
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


def test_other_readers_lists_each_reader_with_its_mark_in_the_summarys_order(sensitive: Path) -> None:
    s = read_sensitivity(RunDir(sensitive))
    assert s is not None and s.readers == [A, B]
    assert other_readers(s, "mode:1") == f"{A} ✓, {B} ✗"
    assert other_readers(s, "mode:2") == f"{A} ~, {B} ✗"
    assert other_readers(s, "concept:7") == f"{A} ✓, {B} ~"
    assert other_readers(s, "slice:1") == f"{A} ✓, {B} ✓"  # compared, but the profiles say nothing beside a slice
    assert other_readers(None, "mode:1") is None
    # a strong concept is compared as concept:ID too; coverage gaps carry no verdict and are never compared
    strong, gap = [{"rank": 1, "concept_id": 7}], [{"rank": 1, "concept_id": 7}]
    annotate(s, "strengths", strong)
    annotate(s, "coverage_gaps", gap)
    assert strong[0]["other_readers"] == f"{A} ✓, {B} ~" and "other_readers" not in gap[0]


def test_a_run_without_sensitivity_reads_none(tmp_path: Path) -> None:
    assert read_sensitivity(RunDir(judged_run(tmp_path / "run"))) is None


def _printed(run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    from cg_ray.cli.metrics import print_findings

    print_findings(RunDir(run))
    return capsys.readouterr().out


def test_the_cli_ends_each_finding_line_with_the_other_readers(tmp_path: Path, capsys) -> None:
    run = judged_run(tmp_path / "run")
    before = _printed(run, capsys)
    assert "other readers" not in before
    write_sensitivity(run)
    after = _printed(run, capsys)
    lines = after.splitlines()
    draw = next(line for line in lines if "Rows with “draw”" in line)
    assert draw.endswith(f"  other readers: {A} ✓, {B} ✗")
    pawn = next(line for line in lines if "candidate" in line and "Rows with “pawn”" in line)
    assert pawn.endswith(f"  other readers: {A} ~, {B} ✗")
    concept = next(line for line in lines if "concept 7" in line)
    assert concept.endswith(f"  other readers: {A} ✓, {B} ~")
    assert not any("other readers" in line for line in lines if "task=geometry" in line)  # a slice: metadata
    # every other byte as it was without sensitivity/
    assert re.sub(r"  other readers: [^\n]*", "", after) == before


def test_the_profiles_carry_other_readers_only_where_sensitivity_ran(tmp_path: Path) -> None:
    from cg_ray.report.documents import profile

    run = judged_run(tmp_path / "run")
    plain = {kind: profile(RunDir(run), kind, 50) for kind in ("failure_modes", "slices", "weaknesses")}
    assert not any("other_readers" in item for p in plain.values() for item in (p or {})["items"])
    write_sensitivity(run)
    modes = profile(RunDir(run), "failure_modes", 50)
    assert modes is not None
    assert [m["other_readers"] for m in modes["items"]] == [f"{A} ✓, {B} ✗", f"{A} ~, {B} ✗"]
    slices = profile(RunDir(run), "slices", 50)
    assert slices is not None and "other_readers" not in slices["items"][0]  # a metadata rule: nothing said
    weak = profile(RunDir(run), "weaknesses", 50)
    assert weak is not None and weak["items"][0]["other_readers"] == f"{A} ✓, {B} ~"


def test_the_section_view_says_each_status_beside_chance_and_near_misses(sensitive: Path) -> None:
    from cg_ray.report.sensitivity import sensitivity_view

    view = sensitivity_view(RunDir(sensitive))
    assert view is not None and view["rule"] == RULE and view["total"] == 3  # the slice apart
    # headline counts: failure modes and concepts; the slice counted apart (counted from findings.parquet)
    assert [r["statuses_text"] for r in view["readers"]] == [
        "2 found, 1 partly, 0 not found",
        "0 found, 1 partly, 2 not found",
    ]
    assert [r["slices_text"] for r in view["readers"]] == ["1 found, 0 partly, 0 not found"] * 2
    assert [f["finding"] for f in view["slices"]] == ["slice:1"]
    first, second = view["pairs"]
    assert (first["reader_b"], first["shared"], first["layers"]) == (A, "81% / 55% / 12%", "20 → 20")
    assert (second["layers"], second["widths"], second["confirmed"]) == ("20 → 13", "4,608 → 2,304", "3 → 2")
    mode1 = view["findings"][0]
    assert mode1["finding"] == "mode:1" and mode1["other_readers"] == f"{A} ✓, {B} ✗"
    assert (
        mode1["estimate_text"] == "the run's own estimate of its rows: -0.180 (on the halves that chose it: not a test)"
    )
    assert mode1["fresh_rows"] is None and mode1["fresh_text"].startswith("not tested on fresh rows")
    assert view["fresh"].startswith("none tested on fresh rows")
    under_a, under_b = mode1["readers"]  # in the summary's order
    assert (under_a["reader"], under_a["mark"], under_a["status"]) == (A, "✓", S.FOUND)
    assert under_a["overlap"] == (
        "mode:1 (Rows with “draw” and “board”): Jaccard 0.62 (0.04 by chance), covers 71% of its rows"
    )
    assert under_b["overlap"] == "no confirmed finding of this reader overlaps these rows"
    assert under_b["near"] == "its best candidate flagging rows like these: concept:12, q=0.081"  # a near miss
    assert not any(k.startswith("effect") for k in under_a | under_b)  # no verdict of its own


def test_a_probe_says_which_findings_replicate_on_fresh_rows(sensitive: Path) -> None:
    from cg_ray.artifacts.probe import ProbeResult
    from cg_ray.report.sensitivity import sensitivity_view
    from cg_ray.schemas.probe import PROBE_RESULTS_SCHEMA

    rows = [ProbeResult("mode:1", "refuted", 40, probe=1), ProbeResult("concept:7", "unsettled", 40, probe=1)]
    rows.append(ProbeResult("concept:7", "confirmed", 80, probe=2))  # a later probe confirmed it: its standing
    RunDir(sensitive).write_table(L.PROBE_RESULTS, pa.Table.from_pylist([r.row() for r in rows], PROBE_RESULTS_SCHEMA))
    view = sensitivity_view(RunDir(sensitive))
    assert view is not None
    by = {f["finding"]: f for f in view["findings"]}
    assert (by["mode:1"]["fresh_rows"], by["concept:7"]["fresh_rows"], by["mode:2"]["fresh_rows"]) == (
        "refuted",
        "confirmed",
        None,
    )
    assert by["concept:7"]["fresh_text"] == "on new items (cg-ray probe): confirmed"
    assert view["fresh"] == "on fresh rows (cg-ray probe): 1 of 2 probed confirmed"


def test_a_format_1_sensitivity_reads_under_the_new_names(sensitive: Path) -> None:
    """sensitivity/ written before #59: status "replicates", the re-judged effect with its verdict."""
    from cg_ray.report.sensitivity import sensitivity_view

    old = [
        {
            k: v
            for k, v in _finding(*st).items()
            if k not in ("jaccard_by_chance", "best_q", "best_q_finding", "own_estimate")
        }
        | {"status": "replicates" if st[2] == S.FOUND else st[2], "effect": -0.18, "effect_low": -0.25}
        | {"effect_high": -0.1, "effect_confirmed": True}
        for st in STATUSES
    ]
    (sensitive / L.SENSITIVITY_FINDINGS).unlink()
    pq.write_table(pa.Table.from_pylist(old), sensitive / L.SENSITIVITY_FINDINGS)
    s = read_sensitivity(RunDir(sensitive))
    assert s is not None and other_readers(s, "mode:1") == f"{A} ✓, {B} ✗"
    assert {f["status"] for f in s.findings} == set(S.READER_STATUSES)
    assert not any("effect_confirmed" in f or "effect_low" in f for f in s.findings)
    view = sensitivity_view(RunDir(sensitive))
    assert view is not None and view["findings"][0]["own_estimate"] == -0.18
    assert view["findings"][0]["readers"][1]["near"] == ""  # not recorded then: nothing said
    from cg_ray.api.analyses import read_sensitivity as read_run_sensitivity  # read_run(...).sensitivity

    frame = read_run_sensitivity(RunDir(sensitive)).findings  # type: ignore[union-attr]
    assert "effect_confirmed" not in frame.columns and set(frame["status"]) == set(S.READER_STATUSES)


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
    assert not any("other_readers" in item for p in plain["profiles"].values() for item in p["items"])
    write_sensitivity(measured)
    assert main(["report", str(measured)]) == 0
    doc = _embedded(measured)
    section = doc["sensitivity"]
    assert [p["reader_b"] for p in section["pairs"]] == [A, B]
    assert [f["finding"] for f in section["findings"]] == ["mode:1", "mode:2", "concept:7"]
    assert [f["finding"] for f in section["slices"]] == ["slice:1"]
    assert [m["other_readers"] for m in doc["profiles"]["failure_modes"]["items"]] == [f"{A} ✓, {B} ✗", f"{A} ~, {B} ✗"]
    assert doc["profiles"]["weaknesses"]["items"][0]["other_readers"] == f"{A} ✓, {B} ~"
    page = (measured / S.REPORT_FILE).read_text(encoding="utf-8")
    assert "Does another reader find the same?" in page and 'id="sensitivity-pairs"' in page
    # the service serves the same document (GET /v1/analyses/{id}/view)
    from cg_ray.report.documents import run_view
    from cg_ray.serve.api_types import RunView

    served = RunView.model_validate(run_view(RunDir(measured))).model_dump()
    assert served["sensitivity"]["findings"][0]["other_readers"] == f"{A} ✓, {B} ✗"


def test_read_run_exposes_the_tables(measured: Path) -> None:
    import cg_ray

    assert cg_ray.read_run(measured).sensitivity is None
    write_sensitivity(measured)
    s = cg_ray.read_run(measured).sensitivity
    assert s is not None and s.summary.rule == RULE and [r["name"] for r in s.summary.readers] == [A, B]
    assert list(s.findings.columns) == FINDINGS_SCHEMA.names and len(s.findings) == len(STATUSES)
    assert s.findings.query("finding == 'mode:1' and reader == @A")["status"].item() == S.FOUND
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
        expect(rows.first.locator("td").nth(1)).to_contain_text("✓ found")
        expect(rows.first.locator("td").nth(1)).to_contain_text("(0.04 by chance)")
        expect(rows.first.locator("td").nth(2)).to_contain_text("✗ not found")
        expect(page.locator("#modes-table th").last).to_have_text("other readers (same rows)")
        expect(page.locator("#modes-table tbody tr").first.locator("td.holds")).to_have_text(f"{A} ✓, {B} ✗")
        expect(page.locator("#modes-candidates-table th").last).to_have_text("MDE (80% power)")
        expect(page.locator("#profile-table tbody tr").first.locator("td.holds")).to_have_text(f"{A} ✓, {B} ~")
        browser.close()
    assert left == [] and errors == []
