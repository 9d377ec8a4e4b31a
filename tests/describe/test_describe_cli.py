"""`cg-ray describe` end to end on a planted run (no reader: --no-tokens), and its output contract."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import cli
from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.outputs import read_descriptions, read_themes
from cg_ray.schemas import DESCRIPTIONS_SCHEMA

from .conftest import planted_rows, rows_schema


def test_describe_writes_descriptions_and_themes(
    make_run: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(labels={0: "',' | '.' | '\\n'", 1: "'books' | 'house'"})
    assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "0,1,2,3,4,5,6"]) == 0
    table = pq.read_table(run / "descriptions.parquet")
    assert table.schema.equals(DESCRIPTIONS_SCHEMA, check_metadata=False)
    rows = {r["concept_id"]: r for r in read_descriptions(RunDir(run)) or []}
    assert sorted(rows) == [0, 1, 2, 3, 4, 5, 6]
    zero = rows[0]
    # a punctuation label, but the rows say geometry: the enrichment wins
    assert zero["source"] == "enrichment" and "task = geometry" in zero["description"]
    assert zero["metadata_enrichment"][0].startswith("task=geometry (×")
    assert rows[1]["source"] == "label" and "over-represented in task = algebra" in rows[1]["description"]
    ex = zero["examples"]
    assert len(ex) == 5 and ex[0]["s_tilde"] >= ex[-1]["s_tilde"] and "geometry" in ex[0]["snippet"]
    assert ex[0]["span_start"] is None  # no token detail without the reader
    themes = read_themes(RunDir(run))
    assert themes is not None and themes["format_version"] == 1
    groups = [sorted(c["concept_id"] for c in t["concepts"]) for t in themes["themes"]]
    assert [1, 2, 3] in groups and [4, 5] in groups
    algebra = themes["themes"][groups.index([1, 2, 3])]
    assert algebra["name"] == "Rows with task = algebra" and algebra["support"] > 0
    assert len(algebra["representative_rows"]) == 3
    summary = themes["summary"]
    assert summary["metadata_fields"]["analysed"] == ["level", "task"]
    assert set(summary["metadata_fields"]["skipped"]) == {"index", "extra"}
    assert summary["token_detail"] == {"available": False, "reason": "disabled (--no-tokens)"}
    out = capsys.readouterr().out
    assert "metadata fields skipped: index: more than 50 distinct values; extra: nested value" in out


def test_default_selection_is_worst_and_least_covered(make_run: Callable[..., Path]) -> None:
    run = make_run()
    assert cli.main(["describe", str(run), "--no-tokens", "--top", "3"]) == 0
    rows = read_descriptions(RunDir(run)) or []
    summary = json.loads((run / "summary.json").read_text())
    worst = [e["concept_id"] for e in summary["rankings"]["worst_model"][:3]]
    assert worst[0] == 0  # the planted weak concept
    got = {r["concept_id"]: r["reasons"] for r in rows}
    assert all("worst_X_model" in got[c] for c in worst)


def test_small_suites_without_eligible_concepts_rank_all_active_ones(make_run: Callable[..., Path]) -> None:
    run = make_run(planted_rows(12))  # --min-rows 5 leaves few eligible; make none eligible
    summary = json.loads((run / "summary.json").read_text())
    summary["rankings"] = {k: [] for k in summary["rankings"]}
    (run / "summary.json").write_text(json.dumps(summary))
    assert cli.main(["describe", str(run), "--no-tokens", "--top", "2"]) == 0
    reasons = {r["concept_id"]: r["reasons"] for r in read_descriptions(RunDir(run)) or []}
    assert sum("worst_X_model_unfiltered" in r for r in reasons.values()) == 2
    assert sum("least_covered_unfiltered" in r for r in reasons.values()) == 2


def test_profile_files_add_their_concepts_and_get_their_descriptions(make_run: Callable[..., Path]) -> None:
    run = make_run()  # `cg-ray metrics` wrote the weakness profile
    profiled = pq.read_table(run / "weaknesses.parquet").column("concept_id").to_pylist()
    assert profiled
    assert cli.main(["describe", str(run), "--no-tokens", "--top", "1"]) == 0
    described = {r["concept_id"]: r for r in read_descriptions(RunDir(run)) or []}
    for c in profiled:
        assert "weaknesses" in described[c]["reasons"]
    # The profile now carries the descriptions (apply_descriptions ran after describe).
    profile = pq.read_table(run / "weaknesses.parquet").to_pylist()
    assert [r["description"] for r in profile] == [described[r["concept_id"]]["description"] for r in profile]


def test_bad_input_is_a_clear_error_and_writes_nothing(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = planted_rows(60)
    run = make_run(rows)
    # Metadata that is not a JSON object: `cg-ray metrics` (which now reads it for slices) refuses the rows,
    # and so does describe on rows changed after the run; neither leaves anything behind.
    rows[40]["metadata"] = "[1, 2]"
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=rows_schema()), bad)
    assert cli.main(["metrics", "--rows", str(bad), "--out", str(tmp_path / "bad_run"), "--min-rows", "5"]) == 2
    assert "row 40, field 'metadata': is not a JSON object" in capsys.readouterr().err
    assert not (tmp_path / "bad_run").exists()
    bad.replace(run / "rows.parquet")
    assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "0"]) == 2
    assert "row 40, field 'metadata': is not a JSON object" in capsys.readouterr().err
    assert not (run / "descriptions.parquet").exists() and not (run / "themes.json").exists()
    assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "99"]) == 2
    assert "concept 99 is not in concepts.parquet" in capsys.readouterr().err
    assert cli.main(["describe", str(tmp_path / "nowhere")]) == 2


def test_a_concept_ranked_adjusted_for_a_field_is_not_described_by_its_value(make_run: Callable[..., Path]) -> None:
    # Concept 0 fires on geometry rows; adjusted for `task` (auto: the weakest slice is task=geometry), naming
    # "task = geometry" would restate the metadata: the distinctive terms of its rows describe it instead,
    # and the enrichment stays beside the description as evidence.
    run = make_run(labels={0: "',' | '.' | '\\n'"}, adjust_for="auto")
    concepts = pq.read_table(run / "concepts.parquet").to_pylist()
    assert concepts[0]["adjusted_for"][0] == "task"
    assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "0"]) == 0
    zero = {r["concept_id"]: r for r in read_descriptions(RunDir(run)) or []}[0]
    assert zero["source"] == "terms" and zero["description"].startswith("Rows with “")
    assert "task = geometry" not in zero["description"] and "geometry" in zero["description"]
    assert zero["metadata_enrichment"][0].startswith("task=geometry (×")
