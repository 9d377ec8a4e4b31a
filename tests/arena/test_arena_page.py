"""The arena's report.html (its ratings and head-to-head, drawn by the explorer's app from one document) in
headless Chromium from file:// with every other request refused, and the explorer's arena analysis on the
service: both show the numbers of ratings.json."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from cg_ray import schemas as S
from cg_ray.arena.concepts import (
    HEAD_TO_HEAD_SCHEMA,
    MODEL_CONCEPTS_SCHEMA,
    HeadToHead,
    PairSummary,
    write_head_to_head,
)
from cg_ray.arena.config import RatingsConfig
from cg_ray.arena.outputs import write_ratings
from cg_ray.arena.ratings import rate
from cg_ray.artifacts.layout import ArenaDir
from cg_ray.report.comparisons import arena_view
from cg_ray.report.html import write_view
from tests.report.offline import embedded, offline_page, self_contained
from tests.serve.test_browser import ARTIFACTS, CHROMIUM, server  # noqa: F401 (the service fixture)

from .arena_builders import bt_battles

chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (scripts/setup.sh installs it)")


def arena_folder(out: Path) -> ArenaDir:
    """An arena run's files without its reading: ratings of three models from battles drawn with known
    strengths, the pairs that met, each model's winning and losing concepts, and its page."""
    out.mkdir(parents=True)
    arena = ArenaDir(out)
    arrays, _ = bt_battles([0.8, 0.0, -0.8], 600, seed=1, tie_prob=0.1)
    write_ratings(arena.ratings_dir, rate(arrays, RatingsConfig(bootstrap=50)), {"source": "battles.jsonl"})
    pairs = []
    for i, j in ((0, 1), (0, 2), (1, 2)):
        met = ((arrays.model_a == i) & (arrays.model_b == j)) | ((arrays.model_a == j) & (arrays.model_b == i))
        won = ((arrays.model_a == i) & (arrays.winner == 0)) | ((arrays.model_b == i) & (arrays.winner == 1))
        n = int(met.sum())
        pairs.append(PairSummary(f"m{i}", f"m{j}", n, n, 0, 0, float((won & met).sum()) / n))

    def heldout(model: str, r: float) -> dict:  # m0's concepts are confirmed held out, m1's never candidates
        if model == "m1":
            return {"confirmed": False, "n_heldout": 0}
        return {"heldout_residual": r, "heldout_residual_low": r - 0.1, "heldout_residual_high": r + 0.1,
                "confirmed": True, "q_value": 0.004, "n_heldout": 20}  # fmt: skip

    concepts = [
        {
            "model": m,
            "kind": kind,
            "rank": 1,
            "concept_id": c,
            "label": f"{kind} of {m}",
            "X_model": x,
            "n_active_rows": 40,
            **heldout(m, r),
        }
        for m, c0 in (("m0", 3), ("m1", 5))
        for kind, c, x, r in (("wins", c0, 0.9, 0.3), ("losses", c0 + 1, 0.1, -0.3))
    ]
    table = pa.Table.from_pylist(concepts, schema=MODEL_CONCEPTS_SCHEMA)
    write_head_to_head(arena, HeadToHead(HEAD_TO_HEAD_SCHEMA.empty_table(), pairs), table)
    summary = {"config": {}, "models": {"m0": "m0", "m1": "m1"}, "row_counts": {}, "seconds": 0.1}
    arena.write_json(S.ARENA_FILE, summary)
    write_view(arena, S.REPORT_FILE, arena_view(arena), "arena")  # as `cg-ray arena` does
    return arena


def test_the_arena_page_embeds_one_document(tmp_path: Path) -> None:
    arena = arena_folder(tmp_path / "arena")
    view, doc = embedded(arena.file(S.REPORT_FILE))
    assert view == "arena" and doc == arena_view(arena)
    ratings = json.loads(arena.ratings.read_text(encoding="utf-8"))
    assert doc["ratings"] == ratings["models"] and doc["pairwise"] == ratings["pairwise"]
    assert [m["model"] for m in doc["ratings"]] == ["m0", "m1", "m2"]  # strongest first
    assert doc["model_runs"] == {"m0": "m0", "m1": "m1"}
    self_contained(arena.file(S.REPORT_FILE))


def test_an_arena_of_the_older_layout_reads_its_held_out_residuals_under_today_s_names(tmp_path: Path) -> None:
    """head_to_head.json 1 and model_concepts.parquet of an arena made before the residual columns were named
    for what they hold (`residual_heldout`): the page's document and the table read them as heldout_residual."""
    import pyarrow.parquet as pq

    arena = arena_folder(tmp_path / "arena")
    today = arena_view(arena)["model_concepts"]
    old = {"heldout_residual": "residual_heldout", "heldout_residual_low": "residual_heldout_low"}
    old["heldout_residual_high"] = "residual_heldout_high"
    doc = json.loads(arena.head_to_head_json.read_text(encoding="utf-8"))
    doc["format_version"] = 1
    doc["model_concepts"] = [{old.get(k, k): v for k, v in e.items()} for e in doc["model_concepts"]]
    arena.head_to_head_json.write_text(json.dumps(doc), encoding="utf-8")
    table = pq.read_table(arena.file(S.MODEL_CONCEPTS_FILE))
    pq.write_table(table.rename_columns([old.get(c, c) for c in table.column_names]), arena.file(S.MODEL_CONCEPTS_FILE))

    assert arena_view(arena)["model_concepts"] == today and today[0]["heldout_residual"] is not None
    read = arena.read_table(S.MODEL_CONCEPTS_FILE)
    assert read is not None and read.equals(table)


def _bt(entry: dict) -> str:
    return f"{entry['bt']:.1f} [{entry['bt_lower']:.1f}, {entry['bt_upper']:.1f}]"


@chromium
@pytest.mark.slow
def test_the_arena_page_renders_offline_with_the_ratings(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    arena = arena_folder(tmp_path / "arena")
    ratings = json.loads(arena.ratings.read_text(encoding="utf-8"))
    best = ratings["models"][0]
    pair = next(p for p in ratings["pairwise"] if (p["model_a"], p["model_b"]) == ("m0", "m1"))
    with sync_playwright() as p:
        loaded: list[float] = []
        browser, page, left, errors = offline_page(p, arena.file(S.REPORT_FILE), "#arena-table tbody tr", loaded)
        for section in ("overview", "concepts", "compare", "start"):
            expect(page.locator(f"#{section}")).to_be_hidden()
        expect(page.locator("#arena-note")).to_contain_text(f"{ratings['n_battles']} battles")
        expect(page.locator("#arena-note")).to_contain_text("95% percentile bootstrap over the battles, 50 resamples")
        rows = page.locator("#arena-table tbody tr")
        expect(rows).to_have_count(3)
        expect(rows.first.locator("td.bt")).to_have_text(_bt(best))
        elo = f"{best['elo']:.1f} [{best['elo_lower']:.1f}, {best['elo_upper']:.1f}]"
        expect(rows.first.locator("td.elo")).to_have_text(elo)
        expect(rows.first.locator("a")).to_have_attribute("href", "models/m0/report.html")  # its own report
        expect(rows.nth(2)).to_contain_text("—")  # m2 was not read: no run
        expect(page.locator("#arena-plot svg circle")).to_have_count(3)
        first_pair = page.locator("#arena-pairs tbody tr").first
        expect(first_pair.locator("td").nth(6)).to_have_text(f"{pair['bt_predicted']:.3f}")
        expect(first_pair.locator("td").nth(5)).to_have_text(f"{pair['score_a']:.3f}")
        expect(page.locator("#arena-concepts")).to_contain_text("wins of m0")
        m0 = page.locator("#arena-concepts .arena-model").first
        expect(m0.locator("li.confirmed").first).to_contain_text("held out +0.300 [+0.200, +0.400]")
        expect(m0.locator("li.confirmed").first).to_contain_text("✓ confirmed")
        expect(m0).to_contain_text("1 confirmed")
        m1 = page.locator("#arena-concepts .arena-model").nth(1)  # its concepts were never candidates
        expect(m1.locator(".none").first).to_have_text("none tested held out")
        expect(m1.locator(".untested").first).to_have_text("1 more of its profile no split chose (not tested)")
        expect(m1).to_contain_text("0 confirmed")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "arena-page.png"), full_page=True)
        browser.close()
    assert not left, f"requests left the page: {left}"
    assert not errors, errors
    assert loaded[0] < 2.0


@chromium
@pytest.mark.slow
def test_the_explorer_draws_an_arena_analysis_with_the_same_numbers(server, tmp_path: Path) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    from cg_ray.serve.db import Analysis, Store
    from cg_ray.serve.keys import create_key
    from cg_ray.serve.settings import ServiceSettings
    from tests.serve.test_browser import signed_in

    base, _ = server
    arena = arena_folder(tmp_path / "arena")
    store = Store(ServiceSettings(data_dir=tmp_path / "data").db_url)  # the fixture's service's store
    owner, key = create_key(store, "arena")
    with store.session() as s:  # an arena analysis whose Ray job has finished
        s.add(
            Analysis(
                id="ana_arena",
                owner=owner,
                upload_ids=[],
                mode="arena",
                options={"model_analyses": {"m0": "ana_m0"}},
                status="succeeded",
                run_dir=str(arena.path),
            )
        )
    best = json.loads(arena.ratings.read_text(encoding="utf-8"))["models"][0]
    with sync_playwright() as p:
        browser, page = signed_in(p, base, key)
        expect(page.locator("#arena")).to_be_visible()
        expect(page.locator("#overview")).to_be_hidden()
        rows = page.locator("#arena-table tbody tr")
        expect(rows.first.locator("td.bt")).to_have_text(_bt(best))
        expect(rows.first).to_contain_text("analysis ana_m0")  # opens the model's own analysis
        expect(page.locator("#arena-plot svg circle")).to_have_count(3)
        page.locator("#arena").screenshot(path=str(ARTIFACTS / "explorer-arena.png"))
        browser.close()
