"""Beyond the metadata on a planted suite: slices, residual gaps, failure modes, distinctive terms.

The suite: rows with `type` × `level` metadata whose cell sets the base success rate (one planted weak slice,
type=geo & level=5), and a hidden property the metadata does not hold — a figure in the prompt, on a random
quarter of the rows, in every cell — that lowers the success rate by 0.4. Concepts 5 and 6 fire on the
figure rows (largely the same rows: one mode), concept 10 on exactly the geo rows (it tracks metadata),
concepts 20.. at random. Some rows carry no score.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.cli import main
from cg_ray.errors import InputError

D_SAE = 64
TYPES = ("alg", "geo", "num")


def planted(n: int = 3000, seed: int = 0, split_figure: bool = False) -> tuple[pa.Table, np.ndarray]:
    """With `split_figure`, two concepts share the figure rows between them (5 on even rows, 7 on odd ones):
    two groups on disjoint rows of one failure, whose rows read the same."""
    rng = np.random.default_rng(seed)
    types = rng.integers(0, 3, n)
    levels = rng.integers(1, 6, n)
    figure = rng.random(n) < 0.25
    p = 0.85 - 0.06 * levels
    p = np.where((types == 1) & (levels == 5), 0.1, p)
    p = np.clip(np.where(figure, p - 0.4, p), 0.02, 1.0)
    scores = (rng.random(n) < p).astype(float)
    unscored = rng.random(n) < 0.05
    records = []
    for i in range(n):
        ids: list[int] = []
        acts: list[float] = []
        if figure[i] and split_figure:
            ids.append(5 if i % 2 == 0 else 7)
            acts.append(float(1.0 + rng.random()))
        elif figure[i]:
            for c in (5, 6):
                if c == 5 or rng.random() < 0.9:
                    ids.append(c)
                    acts.append(float(1.0 + rng.random()))
        if types[i] == 1:
            ids.append(10)
            acts.append(1.0)
        for c in rng.choice(np.arange(20, D_SAE), size=4, replace=False):
            ids.append(int(c))
            acts.append(float(0.5 + rng.random()))
        words = rng.choice(["solve", "compute", "find", "value", "number", "total", "sum", "given"], size=6)
        prompt = f"Problem {i}: {' '.join(words)} the answer."
        if figure[i]:
            prompt += ' [asy] draw((0,0)--(1,1)); label("A", (0,0)); [/asy] as shown.'
        records.append(
            {
                "row_id": f"r{i}",
                "benchmark": "math",
                "score": None if unscored[i] else float(scores[i]),
                "concept_ids": ids,
                "concept_acts": acts,
                "metadata": json.dumps({"type": TYPES[types[i]], "level": f"Level {levels[i]}", "source": "x"}),
                "prompt": prompt,
            }
        )
    schema = S.rows_schema_with_d_sae(D_SAE).append(S.METADATA_FIELD).append(pa.field("prompt", pa.string()))
    rows = [{**r, "model": None, "n_tokens": 10} for r in records]
    return pa.Table.from_pylist(rows, schema=schema), figure


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    tmp = tmp_path_factory.mktemp("beyond")
    table, figure = planted()
    pq.write_table(table, tmp / "rows.parquet")
    out = tmp / "run"
    assert main(["metrics", "--rows", str(tmp / "rows.parquet"), "--out", str(out), "--top-k", "10"]) == 0
    return out, figure


def test_the_planted_weak_slice_is_found_with_its_exact_conditions(planted_run: tuple[Path, np.ndarray]) -> None:
    out, figure = planted_run
    slices = pq.read_table(out / S.SLICES_FILE).to_pylist()
    assert pq.read_schema(out / S.SLICES_FILE).equals(S.SLICES_SCHEMA)
    assert json.loads(slices[0]["conditions"]) == {"type": "geo", "level": "Level 5"}
    assert slices[0]["slice"] == "type=geo & level=Level 5"
    assert slices[0]["low"] <= slices[0]["mean_score"] <= slices[0]["high"] < slices[1]["high"]
    assert [s["rank"] for s in slices] == list(range(1, len(slices) + 1))
    # Unscored rows count for nothing in a slice: n_rows is the scored rows of the cell.
    table, _ = planted()
    meta = [json.loads(m) for m in table.column("metadata").to_pylist()]
    scores = table.column("score").to_pylist()
    n = sum(
        1 for m, s in zip(meta, scores, strict=True) if m["type"] == "geo" and m["level"] == "Level 5" and s is not None
    )
    assert slices[0]["n_rows"] == n
    # The metadata cannot describe the figure rows: no slice comes near them.
    ids = np.array([f"r{i}" for i in range(figure.size)])
    fig_ids = set(ids[figure])
    for s in slices:
        cond = json.loads(s["conditions"])
        rows = {f"r{i}" for i, m in enumerate(meta) if all(m.get(k) == v for k, v in cond.items())}
        assert len(rows & fig_ids) / len(rows | fig_ids) < 0.3


def test_failure_modes_find_the_hidden_property_with_the_right_rows(planted_run: tuple[Path, np.ndarray]) -> None:
    out, figure = planted_run
    modes = pq.read_table(out / S.FAILURE_MODES_FILE)
    assert modes.schema.equals(S.FAILURE_MODES_SCHEMA)
    first = modes.to_pylist()[0]
    assert sorted(first["concept_ids"]) == [5, 6]
    assert first["n_rows"] == int(figure.sum())  # unscored rows count for coverage ...
    assert first["n_scored"] < first["n_rows"]  # ... not for the score
    assert first["heldout_residual_high"] < -0.2 and first["mean_score"] < first["expected_score"]
    assert first["adjusted_for"] == ["type", "level"]
    assert "[asy]" in first["terms"] and "“[asy]”" in first["description"]
    fig_ids = {f"r{i}" for i in np.flatnonzero(figure)}
    assert first["example_row_ids"] and set(first["example_row_ids"]) <= fig_ids
    # Near-identical entries never fill the list twice: 5 and 6 are one mode, listed once.
    listed = [c for m in modes.column("concept_ids").to_pylist() for c in m]
    assert listed.count(5) == 1 and listed.count(6) == 1


def test_the_run_records_every_confirmed_concept_of_its_one_judgement(planted_run: tuple[Path, np.ndarray]) -> None:
    """summary.json records each confirmed concept, shown in the profile or not, so validate and sensitivity
    read the run's judgement instead of making it again: the record is that judgement's (same rows, same
    settings), and the profile's confirmed entries are among it."""
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.config import MetricsConfig
    from cg_ray.profile.judgement import judge_rows

    out, _ = planted_run
    judgement = json.loads((out / S.SUMMARY_FILE).read_text())["profile"]["beyond"]["judgement"]
    recorded = judgement["confirmed_concepts"]
    assert len(recorded) == judgement["confirmed"]["concepts"] > 0
    again = judge_rows(open_rows(out / S.ROWS_FILE), MetricsConfig(top_k=10))
    assert recorded == json.loads(json.dumps(again.confirmed_concepts()))
    assert all(r["low"] <= r["estimate"] <= r["high"] and r["q_value"] <= judgement["fdr"] for r in recorded)
    keys = {(r["concept"], r["direction"]) for r in recorded}
    for name, direction in ((S.WEAKNESSES_FILE, "less"), (S.STRENGTHS_FILE, "greater")):
        shown = pq.read_table(out / name).to_pylist()
        assert {(e["concept_id"], direction) for e in shown if e["confirmed"]} <= keys


def test_groups_on_other_rows_of_the_same_failure_are_one_mode(tmp_path: Path) -> None:
    table, figure = planted(split_figure=True)
    pq.write_table(table, tmp_path / "rows.parquet")
    out = tmp_path / "run"
    assert main(["metrics", "--rows", str(tmp_path / "rows.parquet"), "--out", str(out), "--top-k", "10"]) == 0
    modes = pq.read_table(out / S.FAILURE_MODES_FILE).to_pylist()
    first = modes[0]
    # Concepts 5 and 7 fire on disjoint rows (no Jaccard fold), but their rows read the same ("[asy]", "draw"):
    # one mode, its rows and figures recomputed for both.
    assert sorted(first["concept_ids"]) == [5, 7] and "[asy]" in first["terms"]
    assert first["n_rows"] == int(figure.sum()) and first["confirmed"]
    assert all(5 not in m["concept_ids"] and 7 not in m["concept_ids"] for m in modes[1:])


def test_modes_merge_when_their_rows_overlap_or_their_words_agree() -> None:
    from cg_ray.profile.modes import ModeClass, merge_by_terms, merge_contained

    a = ModeClass((1,), np.arange(0, 100))
    inside = ModeClass((2,), np.arange(40, 90))  # its rows lie inside a's
    apart = ModeClass((3,), np.arange(200, 260))
    merged = merge_contained([a, inside, apart])
    assert [m.members for m in merged] == [(1, 2), (3,)] and merged[0].rows.size == 100
    words = {(1, 2): {"draw", "asy"}, (3,): {"kayak"}, (4,): {"draw"}, (5,): set()}
    more = [*merged, ModeClass((4,), np.arange(300, 310)), ModeClass((5,), np.arange(400, 410))]
    out = merge_by_terms(more, lambda m: words[m])
    assert [m.members for m in out] == [(1, 2, 4), (3,), (5,)]  # no words: never merged
    assert out[0].rows.size == 110


def test_a_member_stays_in_a_mode_only_if_the_rows_it_alone_adds_carry_the_effect() -> None:
    """On the choosing rows: a broad member whose other rows score as their cells is dropped (the mode keeps the
    effect's rows), a fragment whose own rows score as low stays, and a mode whose members all pass is
    returned as it is."""
    from cg_ray.profile.modes import ModeClass, sharpen

    n = 1000
    expected = np.full(n, 0.6)
    scores = np.tile([1.0, 1.0, 0.0, 0.0, 1.0], n // 5)  # 0.6: as the cell predicts
    scores[:200] = np.tile([1.0, 0.0, 0.0, 0.0, 1.0], 40)  # the effect's rows: 0.4, 0.2 below
    train = np.arange(n) % 2 == 0
    rows = {1: np.arange(0, 150), 2: np.arange(0, 400), 3: np.arange(150, 200)}  # core, broad, fragment
    of = rows.__getitem__
    union = lambda *m: ModeClass(m, np.unique(np.concatenate([rows[c] for c in m])))  # noqa: E731
    sharp = sharpen(union(2, 1, 3), of, train, scores, expected)
    assert sharp.members == (1, 3) and np.array_equal(sharp.rows, np.arange(200))
    kept = union(1, 3)
    assert sharpen(kept, of, train, scores, expected) is kept
    # Seen on the choosing rows only: the same broad member, whose held-out rows alone score low, is dropped too.
    held_low = scores.copy()
    held_low[201:400:2] = 0.0
    assert sharpen(union(2, 1, 3), of, train, held_low, expected).members == (1, 3)


def test_a_concept_tracking_a_weak_metadata_value_has_a_residual_covering_zero(
    planted_run: tuple[Path, np.ndarray],
) -> None:
    out, _ = planted_run
    concepts = {r["concept_id"]: r for r in pq.read_table(out / S.CONCEPTS_FILE).to_pylist()}
    geo = concepts[10]
    assert geo["adjusted_for"] == ["type", "level"]
    assert geo["in_sample_residual_low"] <= 0.0 <= geo["in_sample_residual_high"]
    assert geo["X_model"] < 0.5  # it is weak in X_model terms: the metadata explains it
    assert concepts[5]["in_sample_residual_high"] < -0.2  # the figure concepts are not explained
    weak = pq.read_table(out / S.WEAKNESSES_FILE).to_pylist()
    figure_entry = next(w for w in weak if w["concept_id"] in (5, 6))
    assert figure_entry["terms"] and "[asy]" in figure_entry["terms"]
    assert figure_entry["description"].startswith("Rows with “")
    summary = json.loads((out / S.SUMMARY_FILE).read_text())["profile"]["beyond"]
    assert summary["adjusted_for"] == ["type", "level"]
    assert summary["skipped_fields"]["source"] == "a single value"


def test_adjust_for_a_missing_field_is_refused_with_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, _ = planted(400)
    pq.write_table(table, tmp_path / "rows.parquet")
    code = main(
        ["metrics", "--rows", str(tmp_path / "rows.parquet"), "--out", str(tmp_path / "o"), "--adjust-for", "topic"]
    )
    assert code != 0
    assert "'topic'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    # A field with a single value is skipped with a note, and the run goes on.
    assert (
        main(
            [
                "metrics",
                "--rows",
                str(tmp_path / "rows.parquet"),
                "--out",
                str(tmp_path / "s"),
                "--adjust-for",
                "source,type",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "s" / S.SUMMARY_FILE).read_text())["profile"]["beyond"]
    assert summary["adjusted_for"] == ["type"]
    assert any("source" in n and "single value" in n for n in summary["notes"])


def test_nested_and_high_cardinality_fields_are_skipped_and_listed(write_rows, tmp_path: Path) -> None:
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.profile.strata import parse_adjust_for, read_frame

    rows = [
        {
            "row_id": str(i),
            "benchmark": "a" if i % 2 else "b",
            "score": float(i % 3 == 0),
            "concept_ids": [0],
            "concept_acts": [1.0],
            "metadata": json.dumps({"id": i, "tags": ["x"], "kind": "k" if i % 4 else "j"}),
        }
        for i in range(120)
    ]
    schema = S.rows_schema_with_d_sae(2).append(S.METADATA_FIELD)
    path = write_rows(
        table=pa.Table.from_pylist([{**r, "model": None, "n_tokens": 1} for r in rows], schema=schema), d_sae=2
    )
    frame = read_frame(open_rows(path))
    assert set(frame.codes) == {"benchmark", "kind"}
    assert "more than 50" in frame.skipped["id"] and "nested" in frame.skipped["tags"]
    assert parse_adjust_for("auto", frame, ["kind"])[0] == ["benchmark", "kind"]
    with pytest.raises(InputError, match="'nope'"):
        parse_adjust_for("nope", frame)


def test_validate_reports_the_runs_judgement_and_a_null_check_with_no_false_finding(tmp_path: Path) -> None:
    table, _ = planted(3000, seed=1)
    table = table.filter(table.column("score").is_valid())  # validate needs a score on every row
    pq.write_table(table, tmp_path / "rows.parquet")
    out = tmp_path / "val"
    args = ["validate", "--rows", str(tmp_path / "rows.parquet"), "--out", str(out), "--bootstrap", "200"]
    assert main([*args, "--random", "40", "--null-seeds", "2"]) == 0
    report = json.loads((out / S.VALIDATE_FILE).read_text())
    assert report["format_version"] == 5
    # The null check: whole groups' scores permuted within the adjusted cells confirm nothing beyond them.
    check = report["null_check"]
    assert check["permuted_within"] == ["type", "level"] and len(check["confirmed"]) == 2
    assert check["unit"] == "group" and check["false_findings"] == 0
    assert all(
        r["false_findings"] == r["failure_modes"] + r["concepts"] + r["slices_beyond_adjusted"]
        for r in check["confirmed"]
    )
    # The findings: the run's own judgement of the rows (held out over its splits), the confirmed ones listed.
    beyond = report["beyond"]
    assert beyond["adjusted_for"] == ["type", "level"]
    assert beyond["judgement"]["splits"] == 10 and beyond["judgement"]["confirmed"]["failure_modes"] >= 1
    mode = beyond["failure_modes"][0]
    assert sorted(mode["concept_ids"]) == [5, 6] and mode["confirmed"]
    # The figure rows score well below their cells on rows that did not choose the mode.
    assert mode["heldout_residual_low"] <= mode["heldout_residual"] <= mode["heldout_residual_high"] < -0.15
    weakest = beyond["slices"][0]
    assert weakest["slice"] == "type=geo & level=Level 5" and not weakest["beyond_adjusted"]
    assert weakest["conditions"] == {"type": "geo", "level": "Level 5"} and weakest["contrast_high"] < 0
    assert {5, 6} <= {c["concept"] for c in beyond["concepts"] if c["direction"] == "less"}
    assert "rankings" not in beyond  # the curves of the old fit-part modes are gone


def test_auto_adjusts_for_benchmark_and_at_most_two_fields_of_the_best_slices(write_rows) -> None:
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.profile.strata import parse_adjust_for, read_frame

    rows = [
        {
            "row_id": str(i),
            "benchmark": "only",
            "score": float(i % 2),
            "concept_ids": [0],
            "concept_acts": [1.0],
            "metadata": json.dumps({"a": i % 3, "b": i % 5, "c": i % 7}),
        }
        for i in range(200)
    ]
    schema = S.rows_schema_with_d_sae(2).append(S.METADATA_FIELD)
    table = pa.Table.from_pylist([{**r, "model": None, "n_tokens": 1} for r in rows], schema=schema)
    frame = read_frame(open_rows(write_rows(table=table, d_sae=2)))
    assert "single value" in frame.skipped["benchmark"]  # one benchmark: nothing to adjust for there
    assert parse_adjust_for("auto", frame, ["c", "a", "b"])[0] == ["c", "a"]


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--slice-order", "0", "slice_order"),
        ("--slice-min-rows", "0", "slice_min_rows"),
        ("--mode-jaccard", "2", "mode_jaccard"),
    ],
)
def test_bad_beyond_options_are_refused_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, named: str
) -> None:
    table, _ = planted(200)
    pq.write_table(table, tmp_path / "rows.parquet")
    code = main(["metrics", "--rows", str(tmp_path / "rows.parquet"), "--out", str(tmp_path / "o"), flag, value])
    assert code != 0
    assert named in capsys.readouterr().err.replace("-", "_")
    assert not (tmp_path / "o").exists()


def test_terms_are_found_in_a_text_as_the_terms_tokeniser_reads_it() -> None:
    from cg_ray.profile.terms import terms_present

    text = 'Is "kayak" a palindrome? [asy] draw((0,0)--(1,1)); [/asy] Answer yes or no.'
    assert terms_present(text, ["is kayak", "[asy]", "draw", "yes or"]) == 4
    # One-letter words are no token, so "kayak palindrome" is a 2-gram of 'kayak" a palindrome'.
    assert terms_present(text, ["kayak palindrome", "label", "palindrome answer"]) == 1


def test_a_modes_examples_are_a_seeded_draw_of_its_failing_rows() -> None:
    from types import SimpleNamespace

    from cg_ray.profile.findings import examples
    from cg_ray.profile.modes import ModeClass

    scores = np.array([1, 1, 0, 0, 0, 0, 0, 0, np.nan, 0.0])
    frame = SimpleNamespace(scores=scores, row_id=lambda p: f"r{p}")
    beyond = SimpleNamespace(frame=frame, expected=np.full(10, 0.5))
    mode = ModeClass((1,), np.arange(10))
    picked = examples(mode, beyond, np.random.default_rng(0))  # type: ignore[arg-type]
    assert len(picked) == 3 and set(picked) <= {f"r{i}" for i in (2, 3, 4, 5, 6, 7, 9)}  # failing, scored
    assert picked == examples(mode, beyond, np.random.default_rng(0))  # type: ignore[arg-type]
    draws = {tuple(examples(mode, beyond, np.random.default_rng(s))) for s in range(10)}  # type: ignore[arg-type]
    assert len(draws) > 1  # a draw, not the strongest rows
