"""The report's "Readable gaps" section: present after `cg-ray describe`, absent before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cg_ray import cli
from cg_ray.report.readable import highlighted, readable_html


def test_highlight_escapes_and_marks_the_span() -> None:
    example = {"snippet": "a <b> triangle here", "span_start": 6, "span_end": 14}
    assert highlighted(example) == "a &lt;b&gt; <mark>triangle</mark> here"
    assert highlighted({"snippet": "x < y", "span_start": None, "span_end": None}) == "x &lt; y"


def test_report_shows_descriptions_and_themes(make_run: Callable[..., Path]) -> None:
    run = make_run(labels={0: "',' | '.'"})
    assert readable_html(run) == ""
    assert cli.main(["report", str(run)]) == 0
    assert "Readable gaps" not in (run / "report.html").read_text()
    # describe rebuilds the existing report with the new section
    assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "0,1,2,3,4,5"]) == 0
    page = (run / "report.html").read_text()
    assert "<h2>Readable gaps</h2>" in page and "Rows with task = algebra" in page
    assert "Rows with task = geometry (100% of its rows, ×" in page and "task=geometry (×" in page
    assert "Metadata fields not analysed: index (more than 50 distinct values)" in page


def test_concept_tables_lead_with_the_description_and_keep_the_label(make_run: Callable[..., Path]) -> None:
    import re

    import pyarrow.parquet as pq

    run = make_run(labels={0: "',' | '.'"})
    assert cli.main(["report", str(run)]) == 0
    assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "0,1,2,3,4,5"]) == 0
    described = {r["concept_id"]: r["description"] for r in pq.read_table(run / "descriptions.parquet").to_pylist()}
    page = (run / "report.html").read_text()
    rows = re.findall(r"<tr><td class='num'>(\d+)</td><td>(.*?)</td>", page)
    shown = [(int(c), cell) for c, cell in rows if int(c) in described]
    assert shown, "no described concept in the concept tables"
    for concept, cell in shown:
        assert cell.startswith(described[concept].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
        assert "label: " in cell
