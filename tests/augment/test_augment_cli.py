"""`cg-ray augment` end to end on a small scoped run (tests/augment/scripted.py): items that carry a gap's
concept close it and raise the benchmark's in-scope coverage by exactly those gaps; items that do not are
dropped by the reader; items of nothing in particular, kept anyway, close nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.benchmarks.local import load_normalized
from cg_ray.benchmarks.sources import NormalizedSource
from cg_ray.cli import main
from tests.augment.scripted import READER_FACTORY, build_run, item_requests, writer_script
from tests.describe.endpoint_server import serve


@pytest.fixture(scope="module")
def scoped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("augment"))


@pytest.fixture
def run(scoped: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(scoped, tmp_path / "run"))


def augment(run: Path, url: str, *extra: str) -> int:
    return main(["augment", str(run), "--benchmark", "narrow", "--writer-endpoint", url, "--writer-model",
                 "scripted-model", "--reader-factory", READER_FACTORY, *extra])  # fmt: skip


def outputs(run: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[int, dict[str, Any]]]:
    rd = RunDir(run)
    items = pq.read_table(rd.file(L.AUGMENT_ITEMS)).to_pylist()
    coverage = {r["concept_id"]: r for r in pq.read_table(rd.file(L.AUGMENT_COVERAGE)).to_pylist()}
    return rd.read_json(L.AUGMENT_SUMMARY), items, coverage


def in_scope(run: Path) -> tuple[int, int]:
    """(concepts in the reference's use, gaps) of narrow, as scope wrote them."""
    gaps = pq.read_table(RunDir(run).file(L.SCOPE_GAPS)).to_pandas()
    mine = gaps[gaps["benchmark"] == "narrow"]
    return int(mine["in_reference"].sum()), int(mine["gap"].sum())


def test_items_carrying_the_concept_close_each_gap_and_raise_coverage_by_exactly_those(run: Path) -> None:
    n_in, n_gaps = in_scope(run)
    assert n_gaps == 2
    script = writer_script("carry")
    with serve(script) as url:
        assert augment(run, url, "--items", "40") == 0
    summary, items, coverage = outputs(run)
    assert set(coverage) == {7, 8}
    for c, row in coverage.items():
        assert (row["state_before"], row["state_after"]) == ("missing", "covered"), row
        assert row["bench_rows_before"] == 0 and row["bench_rows_after"] == row["items_kept"] == row["items_firing"]
        assert row["items_kept"] >= 35 and row["class_before"] == "missing" and row["class_after"] != "missing"
        assert all(("zorblat" if c == 7 else "quintal") in i["prompt"] for i in items if i["concept_id"] == c)
    before, after = summary["coverage"]["in_scope_coverage"]
    assert before == pytest.approx((n_in - 2) / n_in) and after == pytest.approx(1.0)
    assert after - before == pytest.approx(2 / n_in)
    assert summary["coverage"]["gaps"] == [2, 0]
    # the writer's faults are caught where they should be, and counted
    requests = summary["requests"]["writer"]
    assert summary["requests"]["malformed"] == sum(
        sum(i % 9 == 4 for i in range(g["requests"])) for g in summary["gaps"]
    )
    wrong = [i for i in items if i["dropped"] == "wrong_reference"]
    assert wrong and len(wrong) == summary["requests"]["dropped"]["wrong_reference"]
    assert len(item_requests(script)) == requests
    kept = [i for i in items if i["dropped"] is None]
    assert summary["coverage"]["items_added"] == len(kept)
    exported = [json.loads(x) for x in (run / L.AUGMENT_EXPORT / "items.jsonl").read_text().splitlines()]
    assert [e["prompt"] for e in exported] == [i["prompt"] for i in kept]
    assert set(exported[0]) == {"id", "benchmark", "prompt", "reference", "choices", "metadata"}
    assert exported[0]["benchmark"] == "narrow" and exported[0]["reference"] == kept[0]["reference"]
    source = NormalizedSource(kind="normalized", path=str(run / L.AUGMENT_EXPORT / "items.jsonl"), scorer="exact")
    loaded = list(load_normalized(source))  # the benchmark's own loader reads them as its rows
    assert [r["prompt"] for r in loaded] == [i["prompt"] for i in kept] and loaded[0]["benchmark"] == "narrow"
    for name in S.AUGMENT_EXPORT_FILES.values():
        assert (run / L.AUGMENT_EXPORT / name).is_file()
    assert not (run / "augment.work").exists()
    assert RunDir(run).steps()[-1]["step"] == "augment"


def test_items_without_the_concept_are_dropped_by_the_reader_and_claim_nothing(run: Path) -> None:
    with serve(writer_script("miss")) as url:
        assert augment(run, url) == 0
    summary, items, coverage = outputs(run)
    assert items and all(i["dropped"] in ("reader", "wrong_reference", "near_copy") for i in items)
    assert summary["requests"]["dropped"]["reader"] > 0 and summary["coverage"]["items_added"] == 0
    for row in coverage.values():
        assert row["state_before"] == row["state_after"] == "missing" and row["items_kept"] == 0
        assert row["bench_n_after"] == row["bench_n_before"] and row["class_after"] == row["class_before"]
    before, after = summary["coverage"]["in_scope_coverage"]
    assert after == before
    assert (run / L.AUGMENT_EXPORT / "items.jsonl").read_text() == ""


def test_null_items_of_nothing_in_particular_kept_anyway_raise_no_targeted_class(run: Path) -> None:
    with serve(writer_script("miss")) as url:
        assert augment(run, url, "--no-reader-check") == 0
    summary, _, coverage = outputs(run)
    assert summary["coverage"]["items_added"] > 30  # kept and counted: the reader check was off
    for row in coverage.values():
        assert row["items_kept"] > 0 and row["items_firing"] == 0
        assert row["state_before"] == row["state_after"] == "missing"
        assert row["class_before"] == row["class_after"] == "missing"
    assert summary["coverage"]["gaps"] == [2, 2]
    before, after = summary["coverage"]["in_scope_coverage"]
    assert after == before


def test_dry_run_prints_the_plan_and_writes_nothing(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.name for p in run.iterdir())
    assert augment(run, "http://127.0.0.1:9/v1", "--dry-run", "--items", "10") == 0
    out = capsys.readouterr().out
    assert "concept:7" in out and "concept:8" in out and "writer requests 30" in out
    assert sorted(p.name for p in run.iterdir()) == before


def test_a_theme_of_uncovered_rows_is_targeted_by_its_concept_and_the_writer_sees_its_rows(run: Path) -> None:
    summary = RunDir(run).read_json(L.SCOPE_SUMMARY)
    view = next(b for b in summary["benchmarks"] if b["benchmark"] == "narrow")["row_view"]
    themes = [t for t in view["themes"] if t["confirmed"]]
    assert view["confirmed"] and themes and themes[0]["concept"] in {7, 8}
    script = writer_script("carry")
    with serve(script) as url:
        assert augment(run, url, "--theme", "1", "--items", "10") == 0
    _, _, coverage = outputs(run)
    assert set(coverage) == {themes[0]["concept"]}  # the theme's concept, and nothing else
    row = coverage[themes[0]["concept"]]
    assert row["items_kept"] > 0 and row["items_firing"] == row["items_kept"]
    assert row["bench_rows_after"] == row["bench_rows_before"] + row["items_kept"]
    shown = themes[0]["examples"][0][:60]
    assert any(shown in request for request in item_requests(script))  # the theme's reference rows shown


def test_the_row_view_after_drops_the_filled_theme_and_shrinks_the_uncovered_share(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The row view recomputed by scope's code with the kept items as benchmark rows: the "before" is scope's
    own, the filled theme is no longer confirmed and less of the reference is uncovered; items the reader
    drops change nothing."""
    stored = next(b for b in RunDir(run).read_json(L.SCOPE_SUMMARY)["benchmarks"] if b["benchmark"] == "narrow")
    first = next(t for t in stored["row_view"]["themes"] if t["confirmed"])["concept"]
    with serve(writer_script("carry")) as url:
        assert augment(run, url, "--theme", "1", "--items", "40") == 0
    view = outputs(run)[0]["row_view"]
    before, after = view["before"], view["after"]
    assert before["uncovered"] == stored["row_view"]["uncovered"] and first in before["themes"]
    assert first not in after["themes"]
    assert after["uncovered"]["reference"]["share"] < before["uncovered"]["reference"]["share"]
    assert after["uncovered"]["benchmark"]["of"] == before["uncovered"]["benchmark"]["of"] + view["items_added"]
    assert "uncovered share of ref:traffic: " in capsys.readouterr().out
    with serve(writer_script("miss")) as url:
        assert augment(run, url, "--theme", "1", "--items", "10") == 0
    missed = outputs(run)[0]["row_view"]
    assert missed["items_added"] == 0 and missed["after"] == missed["before"] == before


def test_a_theme_that_does_not_exist_is_refused_naming_how_many_there_are(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(writer_script("carry")) as url:
        assert augment(run, url, "--theme", "9") == 2
    assert "--theme 9" in capsys.readouterr().err
    assert not RunDir(run).has(L.AUGMENT_SUMMARY)
