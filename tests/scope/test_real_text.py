"""`cg-ray scope` on real text read by the default reader (issue #57): SocialIQA items dealt into a benchmark
that never asks "Why did X …?" and a sibling reference where 15% of the items do. Every latent of the real
reader also fires on a background of other rows; the row-level view finds the question form as a theme made
mostly of those items (the code before had no row-level view: this fails there). Both sides drawn alike (the
null) confirm no region. `cg-ray augment --theme 1` with a scripted writer whose items are held-out SocialIQA
questions: "why" questions fill the theme, by counts a recount with `cg-ray extract` gives again; other
questions are mostly dropped by the reader and fill nothing."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import cli
from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import SCOPE_ROWS, SCOPE_SUMMARY, RunDir
from cg_ray.augment.writer import item_text
from tests.describe.endpoint_server import Script, serve

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
    """One run of two benchmarks read together: narrow (no "why") and wide (15% "why"). Returns the run and the
    ids of wide's "why" items."""
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
    (tmp / "held_out.json").write_text(json.dumps(rest[2 * SIDE :]))  # items in no side: the writer's
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


@pytest.fixture(scope="module")
def null_run(run: tuple[Path, set[str]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rows read for `run` (narrow and wide pooled: 7.5% "why"), dealt at random into null_a and null_b:
    both sides drawn alike, as read by the same reader (no second reading: CI's time)."""
    path, _ = run
    table = pq.read_table(path / "rows.parquet")
    deal = np.random.default_rng(1).permutation(table.num_rows) % 2
    sides = pa.array(np.where(deal == 0, "null_a", "null_b"), table.schema.field("benchmark").type)
    table = table.set_column(table.schema.get_field_index("benchmark"), "benchmark", sides)
    tmp = tmp_path_factory.mktemp("scope_null")
    rows = tmp / "null.rows.parquet"
    pq.write_table(table, rows)
    shutil.copy(path.parent / "suite.rows.manifest.json", tmp / "null.rows.manifest.json")  # the same reader
    assert cli.main(["metrics", "--rows", str(rows), "--out", str(tmp / "run"), "--min-rows", "5"]) == 0
    return tmp / "run"


def test_the_null_confirms_no_region(null_run: Path) -> None:
    path = null_run
    assert cli.main(["scope", str(path), "--benchmark", "null_a", "--reference", "null_b"]) == 0
    summary = RunDir(path).read_json(SCOPE_SUMMARY)
    view = next(b for b in summary["benchmarks"] if b["benchmark"] == "null_a")["row_view"]
    assert not view["confirmed"]
    assert not any(t["confirmed"] for t in view["themes"])


def _writer(items: list[dict[str, Any]]) -> Script:
    """A writer whose i-th item of a gap is the i-th of `items` (SocialIQA rows, in the benchmark's format)."""

    def answer(prompt: str) -> str:
        i = int(re.search(r"variant \d+-(\d+)", prompt).group(1))  # type: ignore[union-attr]
        row = items[i % len(items)]
        return json.dumps({"prompt": row["prompt"], "reference": row["reference"], "choices": row["choices"]})

    return Script(answer, structured=lambda prompt, _fmt: answer(prompt))


def _augment(run: Path, items: list[dict[str, Any]], tmp: Path) -> dict[str, Any]:
    config = tmp / "augment.yaml"
    config.write_text(json.dumps({"reader": {"dtype": "float32"}}))  # as the rows were read (JSON is YAML)
    with serve(_writer(items)) as url:
        code = cli.main(["augment", str(run), "--benchmark", "narrow", "--reference", "wide", "--theme", "1",
                         "--items", "20", "--writer-endpoint", url, "--writer-model", "scripted-model",
                         "--reference-check", "none", "--config", str(config)])  # fmt: skip
    assert code == 0
    return RunDir(run).read_json(L.AUGMENT_SUMMARY)


def test_augment_fills_the_theme_with_held_out_questions_as_a_recount_by_extract_says(
    run: tuple[Path, set[str]], tmp_path: Path
) -> None:
    path, _ = run
    held_out = json.loads((path.parent / "held_out.json").read_text())
    why, other = [r for r in held_out if _why(r)], [r for r in held_out if not _why(r)]
    assert len(why) >= 15 and len(other) >= 60
    results = {}
    for name, items in (("why", why), ("other", other)):
        copy = Path(shutil.copytree(path, tmp_path / name))
        assert cli.main(["scope", str(copy), "--benchmark", "narrow", "--reference", "wide"]) == 0
        results[name] = (_augment(copy, items, tmp_path), copy)
    (summary, copy), (off, _) = results["why"], results["other"]
    (gap,), (off_gap,) = summary["gaps"], off["gaps"]
    assert gap["kept"] >= 10 and off_gap["kept"] <= gap["kept"] / 2  # off-theme items: the reader drops most
    # a recount of the kept items by `cg-ray extract` (the same reader) gives the rows the coverage added
    out, recount_input = tmp_path / "items.rows.parquet", tmp_path / "items.jsonl"
    with recount_input.open("w", encoding="utf-8") as f:  # as the suite's rows were given: options in the text
        for line in (copy / L.AUGMENT_EXPORT / "items.jsonl").read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            text = item_text(item["prompt"], item["choices"])
            f.write(json.dumps({"id": item["id"], "benchmark": "items", "prompt": text, "score": 0.0}) + "\n")
    assert cli.main(["extract", "--input", str(recount_input), "--out", str(out), "--dtype", "float32"]) == 0
    concept = int(gap["gap_id"].split(":")[1])
    scope = pq.read_table(RunDir(copy).file(L.SCOPE_GAPS)).to_pandas()
    threshold = scope[(scope["benchmark"] == "narrow") & (scope["concept_id"] == concept)]["firing_threshold"].iloc[0]
    read = pq.read_table(out, columns=["concept_ids", "concept_acts"]).to_pydict()
    recount = sum(
        any(c == concept and a >= threshold for c, a in zip(ids, acts, strict=True))
        for ids, acts in zip(read["concept_ids"], read["concept_acts"], strict=True)
    )
    assert gap["bench_rows"][1] - gap["bench_rows"][0] == recount == gap["kept"]
    # the row view: the uncovered share shrinks with the "why" items, not with the others
    view, off_view = summary["row_view"], off["row_view"]
    share = {k: v["after"]["uncovered"]["reference"]["share"] for k, v in (("why", view), ("other", off_view))}
    before = view["before"]["uncovered"]["reference"]["share"]
    assert share["why"] < before and share["why"] < share["other"]
    assert concept in off_view["after"]["themes"] and (off_gap["state_before"], off_gap["state_after"]) == (
        gap["state_before"], gap["state_before"])  # fmt: skip
    print(f"why: kept {gap['kept']} of {gap['written']}, rows {gap['bench_rows']}, {gap['state_before']} → "
          f"{gap['state_after']}, uncovered {before:.3f} → {share['why']:.3f}, themes {view['after']['themes']}; "
          f"other: kept {off_gap['kept']} of {off_gap['written']}, uncovered → {share['other']:.3f}")  # fmt: skip
