"""`cg-ray scope` on real text read by the default reader (issue #57): SocialIQA items dealt into a benchmark
that never asks "Why did X …?" and a sibling reference where 15% of the items do. Every latent of the real
reader also fires on a background of other rows; the row-level view finds the question form as a theme made
mostly of those items (the code before had no row-level view: this fails there). Both sides drawn alike (the
null) confirm no region."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cg_ray import cli
from cg_ray.artifacts.layout import SCOPE_ROWS, SCOPE_SUMMARY, RunDir

pytestmark = pytest.mark.slow

SIDE = 450  # rows a side (measured on 4 deals: power 2 of 4 at 300, 4 of 4 at 450)
SHARE = 0.15  # of the reference: "why" questions


def _why(row: dict[str, object]) -> bool:
    return str(row["metadata"]["question"]).lower().startswith("why")  # type: ignore[index]


def _text(row: dict[str, object]) -> str:
    letters = "ABC"
    return f"{row['prompt']}\n" + "\n".join(f"({letters[i]}) {c}" for i, c in enumerate(row["choices"]))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> tuple[Path, set[str]]:
    """One run of four benchmarks read together: narrow (no "why"), wide (15% "why"), and null_a / null_b
    (both drawn from every item alike). Returns the run and the ids of wide's "why" items."""
    rows = [json.loads(line) for line in (shared_data / "benchmarks" / "social_iqa.jsonl").open(encoding="utf-8")]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(rows))
    where = [rows[i] for i in order if _why(rows[i])]
    other = [rows[i] for i in order if not _why(rows[i])]
    n_where = round(SHARE * SIDE)
    sides = {
        "narrow": other[:SIDE],
        "wide": where[:n_where] + other[SIDE : 2 * SIDE - n_where],
    }
    rest = [r for r in (where[n_where:] + other[2 * SIDE - n_where :])]
    rest = [rest[i] for i in rng.permutation(len(rest))]
    sides["null_a"], sides["null_b"] = rest[:SIDE], rest[SIDE : 2 * SIDE]
    tmp = tmp_path_factory.mktemp("scope_real")
    inp = tmp / "suite.jsonl"
    with inp.open("w", encoding="utf-8") as f:
        for name, side in sides.items():
            for r in side:
                record = {"id": f"{name}:{r['id']}", "benchmark": name, "prompt": _text(r), "score": 1.0}
                f.write(json.dumps(record) + "\n")
    out = tmp / "suite.rows.parquet"
    assert cli.main(["extract", "--input", str(inp), "--out", str(out), "--dtype", "float32"]) == 0
    assert cli.main(["metrics", "--rows", str(out), "--out", str(tmp / "run"), "--min-rows", "5"]) == 0
    return tmp / "run", {f"wide:{r['id']}" for r in where[:n_where]}


def test_the_row_view_finds_the_left_out_question_form_as_a_theme_of_those_questions(
    run: tuple[Path, set[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, planted = run
    capsys.readouterr()
    assert cli.main(["scope", str(path), "--benchmark", "narrow", "--reference", "wide"]) == 0
    out = capsys.readouterr().out
    summary = RunDir(path).read_json(SCOPE_SUMMARY)
    view = next(b for b in summary["benchmarks"] if b["benchmark"] == "narrow")["row_view"]
    assert view["confirmed"], out
    themes = [t for t in view["themes"] if t["confirmed"]]
    assert 1 <= len(themes) <= 3, out  # few themes, the first the question form
    table = pq.read_table(RunDir(path).file(SCOPE_ROWS)).to_pandas()
    first = table[table["theme"] == themes[0]["concept"]]
    assert first["row_id"].isin(planted).mean() >= 0.8  # the theme is made of "why" items
    assert first["row_id"].isin(planted).sum() >= 0.4 * len(planted)  # and holds a good part of them
    # the CLI leads with the headline and the theme, with an example item
    assert out.index("uncovered:") < out.index(" concepts in use; ") and "e.g. “" in out


def test_the_null_confirms_no_region(run: tuple[Path, set[str]]) -> None:
    path, _ = run
    assert cli.main(["scope", str(path), "--benchmark", "null_a", "--reference", "null_b"]) == 0
    summary = RunDir(path).read_json(SCOPE_SUMMARY)
    view = next(b for b in summary["benchmarks"] if b["benchmark"] == "null_a")["row_view"]
    assert not view["confirmed"]
    assert not any(t["confirmed"] for t in view["themes"])
