"""`cg-ray metrics` end to end: artifacts, official CSVs, atomic publishing, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.cli import main
from cg_ray.synthetic import SyntheticSpec, write_synthetic_rows

ROWS = [
    {"row_id": "1", "benchmark": "a", "score": 1.0, "concept_ids": [0, 2], "concept_acts": [1.0, 0.5]},
    {"row_id": "2", "benchmark": "a", "score": 0.0, "concept_ids": [2], "concept_acts": [2.0]},
    {"row_id": "1", "benchmark": "b", "score": 0.5, "concept_ids": [1, 2], "concept_acts": [1.0, 1.0]},
    {"row_id": "2", "benchmark": "b", "score": None, "concept_ids": [3], "concept_acts": [4.0]},
]


def run(*argv: str | Path) -> int:
    return main([str(a) for a in argv])


def test_artifacts_of_a_small_run(write_rows, tmp_path: Path) -> None:
    rows = write_rows(ROWS, d_sae=5)
    out = tmp_path / "run"
    assert run("metrics", "--rows", rows, "--out", out, "--min-rows", 1) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            S.ROWS_FILE,
            S.CONCEPTS_FILE,
            S.BENCHMARK_CONCEPTS_FILE,
            S.SUMMARY_FILE,
            S.OFFICIAL_COVERAGE_CSV,
            S.OFFICIAL_SALIENCY_CSV,
            S.OFFICIAL_SCORES_CSV,
            *S.PROFILE_FILES,
            S.SLICES_FILE,
            S.FAILURE_MODES_FILE,
        ]
    )
    concepts = pq.read_table(out / S.CONCEPTS_FILE)
    assert concepts.schema.equals(S.CONCEPTS_SCHEMA)
    c = concepts.to_pylist()
    assert [r["concept_id"] for r in c] == [0, 1, 2, 3, 4]
    # a: Σs̃ = 3.5 over 5 concepts -> mean 0.7; χ_bench(a) = [1/0.7, 0, 2.5/0.7, 0, 0].
    # b: Σs̃ = 6 -> mean 1.2; χ_bench(b) = [0, 1/1.2, 1/1.2, 4/1.2, 0].
    assert c[0]["X_bench"] == pytest.approx((1 / 0.7) / 2)
    assert c[2]["X_bench"] == pytest.approx((2.5 / 0.7 + 1 / 1.2) / 2)
    assert c[4]["X_bench"] == 0 and c[4]["coverage_class"] == "missing"
    # χ_model(a,2) = (1·0.5 + 0·2)/2.5 = 0.2; χ_model(b,2) = 0.5 -> X_model = 0.35.
    assert c[2]["X_model"] == pytest.approx(0.35)
    # Concept 3 is active only in an unscored row: covered, but its performance is undefined (null).
    assert c[3]["X_model"] is None and c[3]["X_bench"] > 0 and c[3]["n_benchmarks_active"] == 1
    assert c[4]["X_model"] is None and not c[4]["is_model_gap"]

    pairs = pq.read_table(out / S.BENCHMARK_CONCEPTS_FILE)
    assert pairs.schema.equals(S.BENCHMARK_CONCEPTS_SCHEMA)
    got = {(r["benchmark"], r["concept_id"]): r for r in pairs.to_pylist()}
    assert set(got) == {("a", 0), ("a", 2), ("b", 1), ("b", 2), ("b", 3)}
    assert got[("a", 2)]["chi_model"] == pytest.approx(0.2)
    assert got[("a", 2)]["n_active_rows"] == 2
    assert got[("b", 3)]["chi_model"] is None

    summary = json.loads((out / S.SUMMARY_FILE).read_text())
    assert [b["benchmark"] for b in summary["benchmarks"]] == ["a", "b"]
    assert summary["benchmarks"][0]["missing_pct"] == pytest.approx(60.0)
    assert summary["benchmarks"][1]["n_scored_rows"] == 1
    # Jaccard of active sets {0,2} and {1,2,3} = 1/4.
    assert summary["jaccard"]["matrix"] == [[1.0, 0.25], [0.25, 1.0]]
    assert [e["concept_id"] for e in summary["rankings"]["best_model"]] == [0, 1, 2]  # X_model 1, 0.5, 0.35

    # Official-format CSVs carry the same numbers.
    cov = pacsv.read_csv(out / S.OFFICIAL_COVERAGE_CSV).to_pydict()
    assert cov["concept_id"] == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(cov["cg_coverage"], [r["X_bench"] for r in c])
    sal = pacsv.read_csv(out / S.OFFICIAL_SALIENCY_CSV).to_pylist()
    assert {(r["concept_id"], r["benchmark"]) for r in sal} == {(k[1], k[0]) for k in got}
    scores = pacsv.read_csv(out / S.OFFICIAL_SCORES_CSV)
    assert scores.column_names == ["concept_id", "overall_score", "a_score", "b_score"]
    assert scores.column("overall_score")[2].as_py() == pytest.approx(0.35)
    assert scores.column("b_score")[3].as_py() is None
    # The run directory is self-contained: it carries its rows.
    assert pq.read_table(out / S.ROWS_FILE).num_rows == 4


def test_synthetic_run_and_overwrite(tmp_path: Path) -> None:
    rows = write_synthetic_rows(tmp_path / "rows.parquet", SyntheticSpec(rows_per_benchmark=300, d_sae=256))
    out = tmp_path / "run"
    assert run("metrics", "--rows", rows, "--out", out) == 0
    first = pq.read_table(out / S.CONCEPTS_FILE)
    # An existing output is never replaced silently...
    assert run("metrics", "--rows", rows, "--out", out, "--epsilon", "0.5") == 2
    assert pq.read_table(out / S.CONCEPTS_FILE).equals(first)
    # ...but can be, with new thresholds, from the run directory's own rows.
    assert run("metrics", "--rows", out / S.ROWS_FILE, "--out", out, "--overwrite", "--epsilon", "0.5") == 0
    second = pq.read_table(out / S.CONCEPTS_FILE)
    assert second.column("X_bench").equals(first.column("X_bench"))
    assert second.column("coverage_class").to_pylist().count("missing") > first.column(
        "coverage_class"
    ).to_pylist().count("missing")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_labels_are_joined(write_rows, tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("concept_id,label\n2,arithmetic carries\n3,refusals\n")
    out = tmp_path / "run"
    assert run("metrics", "--rows", write_rows(ROWS, d_sae=5), "--out", out, "--labels", labels) == 0
    got = pq.read_table(out / S.CONCEPTS_FILE).column("label").to_pylist()
    assert got == [None, None, "arithmetic carries", "refusals", None]


def _with(**changes):
    rows = [dict(r) for r in ROWS]
    index = changes.pop("index", 1)
    rows[index].update(changes)
    return rows


BAD_ROWS = {
    "score NaN": (_with(score=float("nan")), "row 1", "'score'", "NaN"),
    "score above 1": (_with(score=1.5), "row 1", "'score'", "outside [0, 1]"),
    "score negative": (_with(score=-0.1), "row 1", "'score'", "outside [0, 1]"),
    "concept id too large": (_with(concept_ids=[5]), "row 1", "'concept_ids'", "d_sae=5"),
    "concept id negative": (_with(concept_ids=[-1]), "row 1", "'concept_ids'", "outside"),
    "ids/acts lengths differ": (_with(concept_acts=[1.0, 2.0]), "row 1", "'concept_acts'", "has 2 values"),
    "negative activation": (_with(concept_acts=[-2.0]), "row 1", "'concept_acts'", "negative"),
    "infinite activation": (_with(concept_acts=[float("inf")]), "row 1", "'concept_acts'", "infinite"),
    "duplicate key": (_with(index=3, benchmark="b", row_id="1"), "row 3", "'row_id'", "duplicate"),
    "repeated concept in a row": (_with(index=2, concept_ids=[2, 2]), "row 2", "'concept_ids'", "more than once"),
    "null row_id": (_with(row_id=None), "row 1", "'row_id'", "null"),
    "empty benchmark": (_with(benchmark=""), "row 1", "'benchmark'", "empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_bad_rows_fail_clearly_and_write_nothing(case, write_rows, tmp_path: Path, capsys) -> None:
    rows, *expected = BAD_ROWS[case]
    schema = S.ROWS_SCHEMA.set(0, pa.field(S.ROW_ID, pa.string()))  # allow writing a null row_id
    table = pa.Table.from_pylist([{"model": "m", "n_tokens": 10, **r} for r in rows], schema=schema)
    path = write_rows(table=table, d_sae=5)
    out = tmp_path / "run"
    assert run("metrics", "--rows", path, "--out", out) == 2
    err = capsys.readouterr().err
    for fragment in [str(path), *expected]:
        assert fragment in err, (fragment, err)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["rows.parquet"]


def test_missing_column(write_rows, tmp_path: Path, capsys) -> None:
    path = write_rows(table=pa.Table.from_pylist(ROWS).drop_columns(["score"]), d_sae=5)
    assert run("metrics", "--rows", path, "--out", tmp_path / "run") == 2
    assert "field 'score': missing required column" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_wrong_column_type(write_rows, tmp_path: Path, capsys) -> None:
    table = pa.Table.from_pylist([{**r, "score": "high", "n_tokens": 3} for r in ROWS])
    path = write_rows(table=table, d_sae=5)
    assert run("metrics", "--rows", path, "--out", tmp_path / "run") == 2
    assert "field 'score': has type string, expected double" in capsys.readouterr().err


def test_empty_file_not_parquet_and_missing_file(write_rows, tmp_path: Path, capsys) -> None:
    empty = write_rows(table=pa.Table.from_pylist([], schema=S.ROWS_SCHEMA), d_sae=5)
    assert run("metrics", "--rows", empty, "--out", tmp_path / "run") == 2
    assert "empty file: no rows" in capsys.readouterr().err
    text = tmp_path / "rows.jsonl"
    text.write_text('{"row_id": 1}\n')
    assert run("metrics", "--rows", text, "--out", tmp_path / "run") == 2
    assert "not a Parquet file" in capsys.readouterr().err
    assert run("metrics", "--rows", tmp_path / "nope.parquet", "--out", tmp_path / "run") == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_d_sae_must_be_known(write_rows, tmp_path: Path, capsys) -> None:
    path = write_rows(ROWS, d_sae=None)
    assert run("metrics", "--rows", path, "--out", tmp_path / "run") == 2
    assert "pass --d-sae" in capsys.readouterr().err
    assert run("metrics", "--rows", path, "--out", tmp_path / "run", "--d-sae", 5, "--min-rows", 1) == 0


def test_several_models_need_a_choice(write_rows, tmp_path: Path, capsys) -> None:
    rows = [{**r, "model": "x"} for r in ROWS] + [{**r, "model": "y", "row_id": r["row_id"] + "y"} for r in ROWS]
    path = write_rows(rows, d_sae=5)
    assert run("metrics", "--rows", path, "--out", tmp_path / "run") == 2
    assert "several models ['x', 'y']; choose one with --model" in capsys.readouterr().err
    assert run("metrics", "--rows", path, "--out", tmp_path / "run", "--model", "y") == 0
    assert json.loads((tmp_path / "run" / S.SUMMARY_FILE).read_text())["n_rows"] == 4
    assert run("metrics", "--rows", path, "--out", tmp_path / "run2", "--model", "z") == 2
    assert "no rows of model 'z'" in capsys.readouterr().err


def test_invalid_options(write_rows, tmp_path: Path, capsys) -> None:
    path = write_rows(ROWS, d_sae=5)
    assert run("metrics", "--rows", path, "--out", tmp_path / "run", "--low-percentile", 95) == 2
    assert "must be below high_percentile" in capsys.readouterr().err
    assert run("metrics", "--rows", path, "--out", tmp_path / "run", "--epsilon", -1) == 2
    assert "--epsilon" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_errors_in_later_batches_name_the_file_row(write_rows, tmp_path: Path, capsys) -> None:
    from cg_ray.artifacts.rows import accumulate_rows, open_rows
    from cg_ray.errors import InputError

    rows = [
        {"row_id": str(i), "benchmark": "a", "score": 1.0, "concept_ids": [1], "concept_acts": [1.0]} for i in range(50)
    ]
    rows[37]["concept_ids"] = [9]
    with pytest.raises(InputError, match="row 37"):
        accumulate_rows(open_rows(write_rows(rows, d_sae=5)), batch_rows=8)


# ---- findings judged held out (issues #31, #38): --splits / --fdr, and what `cg-ray metrics` prints of them


@pytest.mark.parametrize(
    ("option", "value"), [("--fdr", "0"), ("--fdr", "1.5"), ("--fdr", "1"), ("--splits", "1"), ("--splits", "51")]
)
def test_splits_and_fdr_out_of_range_are_refused_naming_the_option(
    option, value, write_rows, tmp_path: Path, capsys
) -> None:
    path = write_rows(ROWS, d_sae=5)
    assert run("metrics", "--rows", path, "--out", tmp_path / "run", option, value) == 2
    assert f"{option}:" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_splits_and_fdr_reach_the_metrics_config() -> None:
    from cg_ray.cli import build_parser
    from cg_ray.cli.metrics import metrics_config_from_args

    args = build_parser().parse_args(["metrics", "--rows", "r", "--out", "o", "--splits", "20", "--fdr", "0.05"])
    config = metrics_config_from_args(args)
    assert (config.splits, config.fdr) == (20, 0.05)
    assert metrics_config_from_args(build_parser().parse_args(["metrics", "--rows", "r", "--out", "o"])).fdr == 0.1


def test_confirmed_findings_print_first_and_candidates_apart(tmp_path: Path, capsys) -> None:
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.cli.metrics import print_findings
    from tests.report.judged_run import mode, slice_, write_run

    modes = [
        mode(1, True, "draw"),
        mode(
            2, False, "queen", heldout_residual=0.08, heldout_residual_low=0.02, heldout_residual_high=0.14
        ),  # above its cells, held out
        mode(3, False, "pawn"),
        mode(
            4,
            False,
            "rook",
            heldout_residual=0.3,
            heldout_residual_low=None,
            heldout_residual_high=None,
            splits_selected=2,
        ),  # no interval
        *(mode(r, False, t) for r, t in ((5, "king"), (6, "bishop"))),
    ]
    run_dir = write_run(tmp_path / "run", modes, [slice_(1, True, "geometry"), slice_(2, False, "algebra")], [])
    print_findings(RunDir(run_dir))
    out = capsys.readouterr().out
    assert (
        "findings (failure modes, slices, concepts) chosen on one half of the rows and tested on the other, over "
        "10 grouped splits (identical prompts, 1,834 groups); confirmed when the splits' q ≤ 10% (their median q × 2; "
        "measured: realised FDR ≤ 2.5% at fdr 10% over 400 simulated suites per setting, 0–15 real effects)" in out
    )
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if "Rows with “draw”" in line)
    assert "residual -0.210 [-0.300, -0.120]" in lines[first] and "500 rows" in lines[first]
    assert "q=0.003" in lines[first] and "candidate" not in lines[first]
    assert (
        lines[first + 1]
        == "  5 candidates not confirmed (q > 0.1; MDE: the effect each would be confirmed at, 80% power): "
        "see failure_modes.parquet"
    )
    listed = [line for line in lines if line.lstrip().startswith("candidate") and "Rows with" in line]
    assert len(listed) == 3 and "Rows with “queen”" in listed[0] and "king" not in out  # at most 3, marked
    assert all("MDE 0.172" in line for line in listed)  # each candidate with its minimum detectable effect
    # one whose whole held-out interval lies above its cells is said to (as the report and the explorer say)
    assert listed[0].endswith("(held out the other way, its whole interval too)")
    assert not any("other way" in line for line in listed[1:])
    # one that fewer than half the splits chose has no interval, and says why
    assert listed[2].endswith("(chosen by 2 of 10 splits: no interval, its residual from those alone)")
    assert "chosen by" not in listed[1]
    assert (  # and the next step for the first one the rows could not settle (not the one the other way)
        f"  next: test it on new items with matched controls: cg-ray probe {run_dir} --gap mode:3  "
        "(--dry-run: the plan; docs/probe.md)" in lines
    )
    geometry = next(i for i, line in enumerate(lines) if line.endswith("task=geometry"))
    assert "0.300 [0.250, 0.360] vs 0.600" in lines[geometry] and "q=0.004" in lines[geometry]
    assert (
        lines[geometry + 1]
        == "  1 candidate not confirmed (q > 0.1; MDE: the effect each would be confirmed at, 80% power): "
        "see slices.parquet"
    )
    assert "candidate" in lines[geometry + 2] and lines[geometry + 2].endswith("task=algebra")


def test_says_plainly_when_nothing_is_confirmed(tmp_path: Path, capsys) -> None:
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.cli.metrics import print_findings
    from tests.report.judged_run import mode, slice_, weakness, write_run

    run_dir = write_run(
        tmp_path / "run", [mode(1, False, "pawn")], [slice_(1, False, "algebra")], [weakness(1, 7, False)]
    )
    print_findings(RunDir(run_dir))
    out = capsys.readouterr().out
    assert "  no failure mode confirmed held out (61 candidates tried)" in out.splitlines()
    assert "  no slice confirmed held out (240 candidates tried)" in out.splitlines()
    assert "held out -0.180 (candidate)" in out  # the concept's held-out residual, not confirmed


def test_the_power_line_says_what_a_mode_of_typical_size_needs() -> None:
    from cg_ray.cli.metrics import _power_line

    line = _power_line({"mde_by_size": [{"n_rows": 100, "mde": 0.2113}, {"n_rows": 400, "mde": 0.1049}]})
    assert line == (
        "power: a failure mode of 100 rows needs a residual of -0.211 to be confirmed 80% of the time; 400 rows: -0.105"
    )
    assert _power_line({}) == "" and _power_line({"mde_by_size": [{"n_rows": 50, "mde": None}]}) == ""
