"""report.html of `cg-ray skills` and `cg-ray estimate --lomo`: the explorer's app with the page's document
embedded, like every other view (no HTML drawn in Python); the numbers the document holds are those of the
tables written beside it, and in headless Chromium the page draws its figures and tables offline."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from cg_ray import cli
from cg_ray.report.html import page
from tests.report.offline import embedded, offline_page, self_contained
from tests.serve.test_browser import ARTIFACTS, CHROMIUM

from .planted import irt_population, two_factor_matrix

N_MODELS, N_TASKS = 40, 8


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(`cg-ray skills` out, `cg-ray estimate --lomo` out) on planted matrices; a constant task is dropped."""
    tmp = tmp_path_factory.mktemp("skills-pages")
    frame, _ = two_factor_matrix(n_models=N_MODELS, seed=5)
    frame["flat"] = 1.0
    frame.index.name = "model"
    frame.to_csv(tmp / "m.csv")
    assert cli.main(["skills", "--matrix", str(tmp / "m.csv"), "--out", str(tmp / "skills"), "--bootstrap", "2"]) == 0
    scores, tasks = irt_population(n_models=12, n_items=80, seed=4)
    rows = [
        {"model": f"m{i}", "row_id": f"r{j}", "score": scores[i, j], "task": f"task{tasks[j]}"}
        for i in range(12)
        for j in range(80)
    ]
    pd.DataFrame(rows).to_csv(tmp / "rows.csv", index=False)
    argv = ["estimate", "--scores", str(tmp / "rows.csv"), "--lomo", "--out", str(tmp / "lomo")]
    assert cli.main([*argv, "--budgets", "0.1,0.25,0.5", "--components", "2", "--random-repeats", "1"]) == 0
    return tmp / "skills", tmp / "lomo"


def _assert_table(doc_table: dict[str, Any], frame: pd.DataFrame) -> None:
    """The document's table holds the frame: its index, then its columns, every value as it is (NaN: null)."""
    assert [c["name"] for c in doc_table["columns"]] == [frame.index.name or "", *map(str, frame.columns)]
    assert len(doc_table["rows"]) == len(frame)
    for got, want in zip(doc_table["rows"], frame.itertuples(name=None), strict=True):
        for g, w in zip(got, want, strict=True):
            if isinstance(w, float) and math.isnan(w):
                assert g is None
            else:
                assert g == (bool(w) if isinstance(w, np.bool_) else w), (got[0], g, w)


def _read(path: Path, index: str) -> pd.DataFrame:
    return pd.read_csv(path, index_col=index)


def test_the_skills_page_embeds_the_skills_tables(outputs: tuple[Path, Path]) -> None:
    out, _ = outputs
    html = out / "report.html"
    kind, doc = embedded(html)
    assert kind == "skills" and doc["name"] == out.name
    # the app with the document, nothing else: Python writes no tags of its own
    assert html.read_text(encoding="utf-8") == page(doc, f"cg_ray skills — {out.name}", "skills")
    self_contained(html)
    summary = json.loads((out / "skills.json").read_text())
    assert (doc["n_models"], doc["n_tasks"]) == (summary["n_models"], summary["n_tasks"]) == (N_MODELS, N_TASKS)
    assert doc["factors"]["n_factors"] == summary["n_factors"]["n_factors"] == 2
    assert doc["warnings"] == ["Constant tasks dropped: flat"]
    loadings = _read(out / "loadings.csv", "task")
    titles = [t["title"] for t in doc["tables"]]
    assert titles[0] == "Loadings" and titles[-1] == "Bootstrap stability over models"
    _assert_table(doc["tables"][0], loadings)
    _assert_table(doc["tables"][1], _read(out / "redundancy.csv", "task"))
    _assert_table(doc["tables"][2], _read(out / "profile_from_k.csv", "k"))
    figure, skills = doc["loadings_figure"], ["skill_1", "skill_2"]
    assert figure["columns"] == skills and sorted(figure["rows"]) == sorted(loadings.index)
    # tasks grouped by their main skill, strongest first
    assert [loadings.loc[t, "main_skill"] for t in figure["rows"]] == sorted(loadings["main_skill"])
    assert figure["z"] == [loadings.loc[t, skills].tolist() for t in figure["rows"]]
    profiles = _read(out / "profiles.csv", "model").sort_values("mean_score", ascending=False)
    bars = doc["profiles_figure"]
    assert bars["labels"] == list(profiles.index) and len(bars["labels"]) == N_MODELS
    assert [s["values"] for s in bars["series"]] == [profiles[s].tolist() for s in skills]


def test_the_lomo_page_embeds_the_lomo_summary(outputs: tuple[Path, Path]) -> None:
    _, out = outputs
    html = out / "report.html"
    kind, doc = embedded(html)
    assert kind == "lomo" and doc["description"] == json.loads((out / "estimate.json").read_text())["description"]
    assert html.read_text(encoding="utf-8") == page(doc, f"cg_ray estimate --lomo — {out.name}", "lomo")
    self_contained(html)
    summary = _read(out / "lomo_summary.csv", "budget")
    _assert_table(doc["tables"][0], summary)
    assert summary["mean_se"].isna().any()  # the span floor claims no interval: its nulls are met too
    figure = doc["figure"]
    assert figure["budgets"] == [10.0, 25.0, 50.0] and figure["target"] == 0.01
    assert {s["name"] for s in figure["series"]} == set(summary["method"])
    for s in figure["series"]:
        rows = summary[summary["method"] == s["name"]].sort_index()
        assert [p["y"] for p in s["points"]] == rows["rmse"].tolist()
        assert [(p["low"], p["high"]) for p in s["points"]] == list(zip(rows["rmse_lo"], rows["rmse_hi"], strict=True))
        assert s["reference"] == (s["name"] == "span_floor")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (scripts/setup.sh installs it)")
def test_the_skills_pages_render_offline(outputs: tuple[Path, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    skills_out, lomo_out = outputs
    loadings = _read(skills_out / "loadings.csv", "task")
    summary = _read(lomo_out / "lomo_summary.csv", "budget")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, tab, left, errors = offline_page(p, skills_out / "report.html", "#skills-loadings svg")
        for section in ("overview", "concepts", "relations", "start"):
            expect(tab.locator(f"#{section}")).to_be_hidden()
        expect(tab.locator("#skills-warnings")).to_have_text("Constant tasks dropped: flat")
        expect(tab.locator("#skills-loadings svg rect")).to_have_count(N_TASKS * 2)
        expect(tab.locator("#skills-profiles svg rect")).to_have_count(N_MODELS * 2)
        expect(tab.locator("#skills-tables table")).to_have_count(4)
        first = tab.locator("#skills-tables table").first.locator("tbody tr").first.locator("td")
        expect(first.nth(0)).to_have_text(str(loadings.index[0]))
        expect(first.nth(1)).to_have_text(f"{loadings.iloc[0]['skill_1']:.3f}")
        tab.screenshot(path=str(ARTIFACTS / "skills.png"), full_page=True)
        browser.close()
        browser, tab, left_lomo, errors_lomo = offline_page(p, lomo_out / "report.html", "#lomo-rmse svg")
        expect(tab.locator("#lomo-rmse svg polyline")).to_have_count(summary["method"].nunique())
        rows = tab.locator("#skills-tables tbody tr")
        expect(rows).to_have_count(len(summary))
        expect(rows.first.locator("td").nth(2)).to_have_text(f"{summary.iloc[0]['rmse']:.4f}")
        tab.screenshot(path=str(ARTIFACTS / "lomo.png"), full_page=True)
        browser.close()
    assert not left + left_lomo, f"requests left the pages: {left + left_lomo}"
    assert not errors + errors_lomo, errors + errors_lomo
