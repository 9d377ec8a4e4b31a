from __future__ import annotations

from pathlib import Path

import pytest

from cg_ray.benchmarks import load_source
from cg_ray.benchmarks.rows import make_row
from cg_ray.benchmarks.sources import ModelOutputsSource
from cg_ray.scoring import SCORERS, score_one
from cg_ray.scoring.apply import ScoringError, check_parsed, score_row, stats_from_rows
from cg_ray.scoring.judge import judge_prompt, parse_verdict


@pytest.mark.parametrize(
    ("response", "reference", "expected"),
    [
        ("Paris", ["paris"], 1.0),
        ("The answer is: The Eiffel Tower.", ["Eiffel tower"], 1.0),
        ("So the answer is (B).", ["(B)"], 1.0),
        ("So the answer is ] ].", ["] ]"], 1.0),  # all-punctuation answers (BBH dyck_languages)
        ("So the answer is ] ) ].", ["] ]"], 0.0),
        ("London", ["Paris", "paris, france"], 0.0),
        ("", ["x"], None),
    ],
)
def test_exact(response: str, reference: list[str], expected: float | None) -> None:
    assert score_one("exact", response, reference) == expected


@pytest.mark.parametrize(
    ("response", "reference", "expected"),
    [
        ("She makes 9 * 2 = $18 every day.\n#### 18", ["18"], 1.0),
        ("#### 1,080", ["1080"], 1.0),
        ("so 13 * 2 = 26\nA: 26", ["18"], 0.0),
        ("The answer is 3.0 bolts", ["3"], 1.0),
        ("It is -7 degrees, after 2 hours", ["-7"], 0.0),  # last number when there is no marker
        ("no digits here", ["5"], None),
        ("Some reasoning.\n#### 0.333333", ["1/3 is 0.3333333"], 1.0),
    ],
)
def test_numeric(response: str, reference: list[str], expected: float | None) -> None:
    assert score_one("numeric", response, reference) == expected


def test_numeric_tolerance_option() -> None:
    assert score_one("numeric", "about 3.14", ["3.14159"]) == 0.0
    assert score_one("numeric", "about 3.14", ["3.14159"], abs_tol=0.01) == 1.0


@pytest.mark.parametrize(
    ("response", "reference", "choices", "expected"),
    [
        ("(B)", ["(B)"], None, 1.0),
        ("B. Rome", ["A"], ["Paris", "Rome"], 0.0),
        ("The answer is A", ["A"], ["(A)5", "(B)6"], 1.0),
        ("I think it is Rome.", ["Rome"], ["Paris", "Rome"], 1.0),
        ("Yes, Alice is taller than Carol.", ["yes"], ["yes", "no"], 1.0),
        ("No. Dave is shorter.", ["yes"], ["yes", "no"], 0.0),
        ("Unknown, the text does not say", ["Unknown"], ["The grandmother", "The grandson", "Unknown"], 1.0),
        ("I cannot decide", ["(A)"], ["x", "y"], None),
    ],
)
def test_multiple_choice(
    response: str, reference: list[str], choices: list[str] | None, expected: float | None
) -> None:
    assert score_one("multiple_choice", response, reference, choices) == expected


def test_any_of_nq_open() -> None:
    refs = ["14 December 1972 UTC", "December 1972"]
    assert score_one("any_of", "It was in December 1972, Apollo 17.", refs) == 1.0
    assert score_one("any_of", "In 1969.", refs) == 0.0
    assert score_one("any_of", "December 1972", refs, mode="exact") == 1.0
    assert score_one("any_of", "   ", refs) is None


def test_judge_prompt_and_verdicts() -> None:
    prompt = judge_prompt("What is 2+2?", "4", ["4"])
    assert "[Question]\nWhat is 2+2?" in prompt and "Reference Answer]\n4\n" in prompt and "[[rating]]" in prompt
    assert "Reference" not in judge_prompt("Write a poem.", "Roses...")
    assert parse_verdict("Good answer. Rating: [[8]]") == 0.8
    assert parse_verdict('Format "[[5]]"... final Rating: [[10]]') == 1.0
    assert parse_verdict("Rating: 3/10") == 0.3
    assert parse_verdict("Rating: [[0]]") is None and parse_verdict("no verdict") is None
    assert score_one("judge", "[[7]]", []) == 0.7


def test_scorers_stay_in_unit_interval_or_none() -> None:
    samples = ["", "42", "(C)", "The answer is yes.", "#### -3.5", "Paris and Rome", "]]]"]
    for name in SCORERS:
        for resp in samples:
            value = score_one(name, resp, ["yes", "42"], ["yes", "no", "maybe"])
            assert value is None or 0.0 <= value <= 1.0, (name, resp, value)


def _row(benchmark: str, scorer: str, response: str | None, score: float | None = None) -> dict[str, object]:
    return dict(
        make_row(
            row_id=f"{benchmark}-{response}",
            benchmark=benchmark,
            prompt="q",
            reference=["4"],
            scorer=scorer,
            response=response,
            score=score,
        )
    )


def test_unparsed_answers_score_zero_and_are_counted() -> None:
    rows = [_row("b", "numeric", "#### 4"), _row("b", "numeric", "no idea"), _row("p", "precomputed", None, 0.5)]
    results = [score_row(r) for r in rows]
    assert results == [(1.0, "scored"), (0.0, "unparsed"), (0.5, "precomputed")]
    stats = stats_from_rows({**r, "score_status": st} for r, (_, st) in zip(rows, results, strict=True))
    assert (stats["b"].scored, stats["b"].unparsed, stats["p"].precomputed) == (1, 1, 1)
    check_parsed(stats)  # one answer parsed: fine


def test_a_benchmark_with_no_parseable_answer_fails_clearly() -> None:
    rows = [_row("gsm8k", "numeric", "no idea"), _row("gsm8k", "numeric", "none at all"), _row("ok", "exact", "4")]
    stats = stats_from_rows({**r, "score_status": score_row(r)[1]} for r in rows)
    with pytest.raises(ScoringError, match=r"benchmark 'gsm8k': scorer 'numeric' could not parse any of its 2 answers"):
        check_parsed(stats)


def _agreement(shared_data: Path, benchmark: str, outputs: str, model: str, scorer: str) -> tuple[float, int]:
    kw = {
        "kind": "model_outputs",
        "path": str(shared_data / "benchmarks" / benchmark),
        "outputs": str(shared_data / "model_outputs" / outputs),
        "model": model,
    }
    ours = load_source(ModelOutputsSource(**kw, scorer=scorer))
    theirs = {r["row_id"]: r["score"] for r in load_source(ModelOutputsSource(**kw, scorer="precomputed"))}
    pairs = [(score_row(r)[0], theirs[r["row_id"]]) for r in ours if theirs[r["row_id"]] is not None]
    return sum(a == b for a, b in pairs) / len(pairs), len(pairs)


@pytest.mark.parametrize(
    "model", ["gpt3-6b_finetuning", "gpt3-6b_verification", "gpt3-175b_finetuning", "gpt3-175b_verification"]
)
def test_numeric_agrees_with_openai_is_correct_on_gsm8k(shared_data: Path, model: str) -> None:
    agreement, n = _agreement(shared_data, "gsm8k.jsonl", "gsm8k_gpt3_solutions.jsonl", model, "numeric")
    assert n == 1319
    assert agreement >= 0.95, f"{model}: {agreement:.4f}"


@pytest.mark.parametrize("model", ["code-davinci-002-cot", "code-davinci-002-direct"])
def test_exact_agrees_with_bbh_codex_scores(shared_data: Path, model: str) -> None:
    agreement, n = _agreement(shared_data, "bbh.jsonl", "bbh_codex.jsonl", model, "exact")
    assert n == 2025
    assert agreement >= 0.95, f"{model}: {agreement:.4f}"
