"""Pairing two models' answers by prompt id: refusals name file, line and field; skips are counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cg_ray.compare.pairs import SEPARATOR, load_answers, load_prompts, pair_answers, reader_texts
from cg_ray.errors import InputError


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_one_file_with_models_pairs_by_id_and_counts_skips(tmp_path: Path) -> None:
    answers = write_jsonl(
        tmp_path / "answers.jsonl",
        [
            {"id": "q1", "model": "big", "output": ["big one", "big one, turn 2"]},
            {"id": "q2", "model": "big", "output": ["big two"]},
            {"id": "q3", "model": "big", "output": ["big three"]},
            {"id": "q4", "model": "big", "output": ["   "]},  # empty: counted
            {"id": "q1", "model": "small", "output": ["small one"]},
            {"id": "q2", "model": "small", "output": [""]},  # empty: counted
            {"id": "q4", "model": "small", "output": [""]},
            {"id": "q5", "model": "small", "output": ["small five"]},  # only in B
        ],
    )
    prompts = write_jsonl(
        tmp_path / "bench.jsonl",
        [
            {"id": f"q{i}", "prompt": f"question {i}", "metadata": {"turns": [f"question {i}", "more"]}}
            for i in range(1, 6)
        ],
    )
    paired = pair_answers(load_answers(answers, "big"), load_answers(answers, "small"), load_prompts(prompts))
    assert [p.id for p in paired.pairs] == ["q1"]
    assert paired.pairs[0].prompt == "question 1" and paired.pairs[0].response_b == "small one"
    assert paired.counts == {
        "only_a": 1,  # q3
        "only_b": 1,  # q5
        "empty_a": 0,
        "empty_b": 1,  # q2
        "empty_both": 1,  # q4
        "no_prompt": 0,
        "paired": 1,
    }
    assert paired.skipped["only_a"] == ["q3"] and paired.skipped["empty_b"] == ["q2"]
    texts, offsets, sides = reader_texts(paired.pairs)
    assert texts == ["question 1" + SEPARATOR + "big one", "question 1" + SEPARATOR + "small one"]
    assert [t[o:] for t, o in zip(texts, offsets, strict=True)] == ["big one", "small one"] and sides == ["a", "b"]
    turn2 = load_answers(answers, "big", turn=2)
    assert turn2["q1"].response == "big one, turn 2" and turn2["q2"].response == ""
    assert load_prompts(prompts, turn=2)["q3"] == "more"


def test_prompts_that_differ_between_the_models_are_refused_naming_the_id(tmp_path: Path) -> None:
    a = write_jsonl(
        tmp_path / "a.jsonl", [{"id": 1, "prompt": "p1", "response": "x"}, {"id": 2, "prompt": "p2", "response": "y"}]
    )
    b = write_jsonl(
        tmp_path / "b.jsonl",
        [{"id": 1, "prompt": "p1", "response": "z"}, {"id": 2, "prompt": "other", "response": "w"}],
    )
    with pytest.raises(InputError) as err:
        pair_answers(load_answers(a), load_answers(b))
    message = str(err.value)
    assert "'2'" in message and "differs" in message and "a.jsonl line 2" in message
    assert err.value.path == str(b) and err.value.line == 2 and err.value.field == "prompt"


def test_missing_prompt_is_a_counted_skip(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "x", "response": "r"}, {"id": "y", "prompt": "py", "response": "r"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "x", "response": "s"}, {"id": "y", "response": "s"}])
    paired = pair_answers(load_answers(a), load_answers(b))
    assert paired.counts["no_prompt"] == 1 and [p.id for p in paired.pairs] == ["y"]
    assert paired.pairs[0].prompt == "py"  # one side's prompt is enough


@pytest.mark.parametrize(
    ("rows", "model", "line", "field", "words"),
    [
        ([{"model": "m", "output": "x"}], "m", 1, "id", "no prompt id"),
        ([{"id": "a", "model": "m"}], "m", 1, "response", "no response"),
        ([{"id": "a", "model": "m", "output": "x"}, {"id": "a", "model": "m", "output": "y"}], "m", 2, "id", "twice"),
        ([{"id": "a", "model": "m", "output": 3}], "m", 1, "output", "expected a string"),
        ([{"id": "a", "model": "m", "output": "x"}], "other", None, "model", "models in the file: m"),
    ],
)
def test_bad_rows_are_refused_with_file_line_and_field(
    tmp_path: Path, rows: list[dict[str, Any]], model: str, line: int | None, field: str, words: str
) -> None:
    path = write_jsonl(tmp_path / "answers.jsonl", rows)
    with pytest.raises(InputError) as err:
        load_answers(path, model)
    assert err.value.path == str(path) and err.value.line == line and err.value.field == field
    assert words in str(err.value)


def test_nothing_to_pair_is_an_error(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "x", "prompt": "p", "response": "r"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "y", "prompt": "p", "response": "r"}])
    with pytest.raises(InputError, match="no prompt answered by both models"):
        pair_answers(load_answers(a), load_answers(b))


def test_match_length_cuts_both_answers_to_the_shorter_one() -> None:
    from cg_ray.compare.pairs import Pair, match_length

    pair = match_length(Pair("q", "p", "one two three four five six seven", "short answer"))
    assert pair.response_b == "short answer" and pair.response_a == "one two"
    assert len(pair.response_a) <= len("short answer")
