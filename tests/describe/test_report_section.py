"""The report's "Readable gaps": the run's descriptions and themes travel in report.html (drawn by the explorer's
app, tests/report/test_report_browser.py), absent before `cg-ray describe`, present after."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cg_ray import cli
from tests.report.test_report import embedded


def test_report_shows_descriptions_and_themes(make_run: Callable[..., Path]) -> None:
    run = make_run(labels={0: "',' | '.'"})
    assert cli.main(["report", str(run)]) == 0
    assert embedded(run)["descriptions"] is None and embedded(run)["themes"] is None
    # describe rebuilds the existing report with the new section
    assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "0,1,2,3,4,5"]) == 0
    view = embedded(run)
    sentences = [d["description"] for d in view["descriptions"]]
    assert any(s.startswith("Rows with task = algebra") for s in sentences)
    assert any(s.startswith("Rows with task = geometry (100% of its rows, ×") for s in sentences)
    assert any(e.startswith("task=geometry (×") for d in view["descriptions"] for e in d["metadata_enrichment"])
    skipped = view["themes"]["summary"]["metadata_fields"]["skipped"]
    assert skipped["index"] == "more than 50 distinct values"  # "Metadata fields not analysed: index (…)"
    for d in view["descriptions"]:  # the highlighted span lies inside its snippet
        for ex in d["examples"][:1]:
            if ex.get("span_start") is not None:
                assert 0 <= ex["span_start"] < ex["span_end"] <= len(ex["snippet"])


def test_concept_tables_lead_with_the_description_and_keep_the_label(make_run: Callable[..., Path]) -> None:
    import pyarrow.parquet as pq

    run = make_run(labels={0: "',' | '.'"})
    assert cli.main(["report", str(run)]) == 0
    assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "0,1,2,3,4,5"]) == 0
    described = {r["concept_id"]: r["description"] for r in pq.read_table(run / "descriptions.parquet").to_pylist()}
    labels = {r["concept_id"]: r["label"] for r in pq.read_table(run / "concepts.parquet").to_pylist()}
    columns = embedded(run)["concepts"]
    shown = dict(zip(columns["concept_id"], zip(columns["description"], columns["label"], strict=True), strict=True))
    assert described, "no described concept"
    for concept, sentence in described.items():
        assert shown[concept] == (sentence, labels[concept])  # the app shows the sentence, the label below it
