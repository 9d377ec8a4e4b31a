"""The load -> generate -> score graph on a real local Ray cluster, with the deterministic fake model."""

from __future__ import annotations

from typing import Any

import pytest

from cg_ray.benchmarks import load_benchmarks, to_dataset
from cg_ray.benchmarks.rows import make_row
from cg_ray.benchmarks.sources import ProbesSource
from cg_ray.generation import generate_responses
from cg_ray.generation.base import GENERATED_SCHEMA
from cg_ray.generation.config import GenerationConfig
from cg_ray.generation.fake import JUDGE_MARKER, WRONG_ANSWER, fake_answer
from cg_ray.pipeline.judge_pass import judge_dataset
from cg_ray.scoring.apply import ScoringError, check_parsed, dataset_stats, score_dataset
from cg_ray.scoring.judge import judge_prompt

FAKE = GenerationConfig(backend="fake", sampling={"max_tokens": 32, "seed": 1})  # type: ignore[arg-type]


def _suite() -> list[Any]:
    rows = load_benchmarks([ProbesSource(kind="probes", per_kind=6, kinds=["arithmetic", "palindrome", "ordering"])])
    rows.append(
        make_row(row_id="pre-1", benchmark="pre", prompt="q", reference=["x"], scorer="precomputed", score=0.25)
    )
    rows.append(
        make_row(
            row_id="resp-1",
            benchmark="resp",
            prompt="q",
            reference=["42"],
            scorer="numeric",
            response="The answer is 42.",
        )
    )
    return rows


@pytest.mark.usefixtures("ray_local")
def test_generate_then_score_with_the_fake_model() -> None:
    rows = _suite()
    ds = score_dataset(generate_responses(to_dataset(rows, blocks=3), FAKE))
    out = {r["row_id"]: r for r in ds.take_all()}
    assert set(out) == {r["row_id"] for r in rows}  # nothing lost, nothing duplicated

    # Rows that came with a score or a response skipped generation and kept them.
    assert out["pre-1"]["score"] == 0.25 and out["pre-1"]["score_status"] == "precomputed"
    assert out["pre-1"]["response"] is None and out["pre-1"]["n_output_tokens"] is None
    assert out["resp-1"]["response"] == "The answer is 42." and out["resp-1"]["score"] == 1.0

    # Generated rows: the fake's deterministic answer, scored by each row's own scorer.
    n_right = 0
    for row in rows:
        if not row["row_id"].startswith("probes"):
            continue
        got = out[row["row_id"]]
        expected = fake_answer(row["row_id"], row["reference"], seed=1)
        assert got["response"] == expected and got["n_output_tokens"] == len(expected.split(" "))
        right = expected != WRONG_ANSWER
        n_right += right
        if row["scorer"] != "multiple_choice":  # a wrong "0" can still be a parse for numeric/exact
            assert got["score"] == (1.0 if right else 0.0), (row, got)
    assert 0 < n_right < 18  # neither all right nor all wrong

    stats = dataset_stats(ds)
    assert stats["probes_arithmetic"].rows == 6 and stats["pre"].precomputed == 1
    # The fake's wrong answer carries no yes/no: the palindrome rows it gets wrong are unparsed, counted.
    assert stats["probes_palindrome"].unparsed == sum(
        fake_answer(r["row_id"], r["reference"], 1) == WRONG_ANSWER
        for r in rows
        if r["benchmark"] == "probes_palindrome"
    )
    check_parsed(stats)


@pytest.mark.usefixtures("ray_local")
def test_output_schema_is_fixed() -> None:
    ds = generate_responses(to_dataset(_suite()), FAKE)
    assert ds.schema().base_schema.equals(GENERATED_SCHEMA)  # type: ignore[union-attr]


@pytest.mark.usefixtures("ray_local")
def test_precomputed_suite_starts_no_generator() -> None:
    rows = [make_row(row_id=f"r{i}", benchmark="b", prompt="q", scorer="precomputed", score=i / 4) for i in range(4)]
    # A backend that would fail if it were started: generation must be skipped entirely.
    broken = GenerationConfig(backend="hf", model="/nonexistent/model")
    out = generate_responses(to_dataset(rows), broken).take_all()
    assert sorted(r["score"] for r in out) == [0.0, 0.25, 0.5, 0.75]


@pytest.mark.usefixtures("ray_local")
def test_scoring_fails_when_no_answer_of_a_benchmark_parses() -> None:
    rows = [
        make_row(
            row_id=f"g{i}",
            benchmark="gsm8k",
            prompt="q",
            reference=["3"],
            scorer="numeric",
            response="I would rather not say.",
        )
        for i in range(3)
    ]
    stats = dataset_stats(score_dataset(generate_responses(to_dataset(rows), FAKE)))
    assert stats["gsm8k"].unparsed == 3
    with pytest.raises(ScoringError, match="benchmark 'gsm8k': scorer 'numeric' could not parse any of its 3"):
        check_parsed(stats)


@pytest.mark.usefixtures("ray_local")
def test_judge_pass_through_the_generation_backend() -> None:
    assert judge_prompt("q", "a").startswith(JUDGE_MARKER)
    rows = [make_row(row_id=f"j{i}", benchmark="chat", prompt=f"Write line {i}", scorer="judge") for i in range(4)]
    rows.append(make_row(row_id="e1", benchmark="exact", prompt="2+2?", reference=["4"], scorer="exact"))
    generated = generate_responses(to_dataset(rows), FAKE)
    judged = score_dataset(judge_dataset(generated, FAKE))
    out = {r["row_id"]: r for r in judged.take_all()}
    for i in range(4):
        row = out[f"j{i}"]
        # The judged row keeps its own prompt and answer; the verdict is parsed into the score.
        assert row["prompt"] == f"Write line {i}" and row["response"] == fake_answer(f"j{i}", [], 1)
        assert row["judge_output"].startswith("The answer is adequate. Rating: [[")
        assert row["score_status"] == "scored" and 0.1 <= row["score"] <= 1.0
    assert out["e1"]["judge_output"] is None and out["e1"]["score_status"] == "scored"


@pytest.mark.usefixtures("ray_local")
def test_scorer_options_reach_the_scorer() -> None:
    rows = [
        make_row(
            row_id="t", benchmark="pi", prompt="pi?", reference=["3.14159"], scorer="numeric", response="about 3.14"
        )
    ]
    strict = score_dataset(to_dataset(rows)).take_all()[0]
    loose = score_dataset(to_dataset(rows), {"pi": {"abs_tol": 0.01}}).take_all()[0]
    assert (strict["score"], loose["score"]) == (0.0, 1.0)
