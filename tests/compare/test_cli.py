"""`cg-ray diff A B --out DIR` end to end: the four files, published atomically, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.contract import DiffSummary, read_document
from cg_ray.cli import main
from cg_ray.report.comparisons import diff_document
from tests.compare.conftest import READER
from tests.report.offline import embedded, self_contained


def run(*argv: str | Path) -> int:
    return main([str(a) for a in argv])


def test_diff_writes_table_json_and_page(planted_runs, tmp_path: Path, capsys) -> None:
    a, b = planted_runs()
    out = tmp_path / "diff"
    assert run("diff", a, b, "--out", out, "--resamples", 200, "--top", 3) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [S.DIFF_FILE, S.DIFF_BENCHMARKS_FILE, S.DIFF_JSON, S.DIFF_HTML]
    )
    doc = read_document(out / S.DIFF_JSON, DiffSummary)
    assert doc.format_version == 1 and doc.kind == "cg_ray.diff"
    assert doc.top_regressed[0]["concept_id"] == 9 and doc.top_improved[0]["concept_id"] == 10
    assert doc.counts.paired == 400 and doc.counts.only_a == 0
    assert doc.config["resamples"] == 200 and len(doc.top_regressed) <= 3
    table = pq.read_table(out / S.DIFF_FILE)
    assert table.schema.equals(S.DIFF_SCHEMA)
    row = {r["concept_id"]: r for r in table.to_pylist()}[9]
    assert row["direction"] == "regressed" and row["rank"] == 1 and row["delta_X_model_high"] < 0
    assert row["delta_X_bench"] == 0.0  # same suite, same activations
    pairs = pq.read_table(out / S.DIFF_BENCHMARKS_FILE)
    assert set(pairs.column("benchmark").to_pylist()) == {"alpha", "beta"}
    # diff.html is the explorer's app with diff.json's document embedded (drawn: tests/compare/test_pages_browser.py)
    view, embedded_doc = embedded(out / S.DIFF_HTML)
    assert view == "diff" and embedded_doc == diff_document(json.loads((out / S.DIFF_JSON).read_text()))
    assert embedded_doc["name"] == "A → B" and embedded_doc["top_regressed"][0]["examples"]["right_in_a_wrong_in_b"]
    self_contained(out / S.DIFF_HTML)
    printed = capsys.readouterr().out
    assert "confidently regressed" in printed
    # the findings first: held out, with the rule and each one's verdict; the same concepts as the planted ones
    held = json.loads((out / S.DIFF_JSON).read_text())["heldout"]
    assert held["n_confirmed"] == {"regressed": 1, "improved": 1} and held["decision"].startswith("confirmed ⇔")
    assert held["regressed"][0]["concept_id"] == 9 and held["regressed"][0]["heldout"]["confirmed"]
    assert doc.top_regressed[0]["heldout"]["confirmed"]  # the bootstrap list carries the verdict too
    assert "held out (10 splits, confirmed when q ≤ 0.1): 1 concept regressed and 1 concept improved" in printed
    assert printed.index("held out (") < printed.index("per-concept intervals on all paired rows")
    # an existing output is not replaced without --overwrite
    assert run("diff", a, b, "--out", out) == 2
    assert "already exists" in capsys.readouterr().err
    assert run("diff", a, b, "--out", out, "--overwrite", "--resamples", 10, "--rank-by", "relative") == 0
    assert read_document(out / S.DIFF_JSON, DiffSummary).config["rank_by"] == "relative"


def test_mismatched_readers_exit_with_one_clear_line_and_no_output(planted_runs, tmp_path: Path, capsys) -> None:
    a, b = planted_runs(reader_b={**READER, "model": "gemma-2-2b"})
    out = tmp_path / "diff"
    assert run("diff", a, b, "--out", out) == 2
    err = capsys.readouterr().err
    assert "reader_model is 'smollm2-135m-instruct' in run A" in err and str(b) in err
    assert not out.exists()


def test_invalid_flag_values_name_the_flag(planted_runs, tmp_path: Path, capsys) -> None:
    a, b = planted_runs()
    assert run("diff", a, b, "--out", tmp_path / "d", "--confidence", 1.5) == 2
    assert "--confidence" in capsys.readouterr().err
    # the held-out findings' settings: one split tests nothing twice; an fdr of 0 confirms nothing
    for flag, value in (("--splits", 1), ("--fdr", 0), ("--tested-per-split", 0)):
        assert run("diff", a, b, "--out", tmp_path / "d", flag, value) == 2
        assert flag in capsys.readouterr().err and not (tmp_path / "d").exists()
