"""The LLM item generator against the scripted OpenAI-compatible server, through a real EndpointCompleter:
pairs parsed with their request ids, malformed answers counted and dropped, wrong references caught (computed
or answered again), a gap the model cannot write for noted, and the same seed giving the same pairs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.endpoint import EndpointCompleter
from cg_ray.probe.generators import (
    ItemGenerator,
    LLMGenerator,
    computed_answer,
    pair_format,
    parse_pair,
    scorer_for,
)
from cg_ray.probe.items import Gap
from tests.describe.endpoint_server import Script, serve

GAP = Gap(
    gap_id="mode:2",
    kind="mode",
    concept_ids=(11, 12),
    description="Rows with “$”",
    terms=("$", "dollars"),
    examples=("Tom has $4 and earns $3 more. How many dollars does he have?", "A pen costs $2. " + "x" * 900),
    benchmark="gsm8k",
    scorer="numeric",
    effect=-0.3,
    confirmed=True,
    n_rows=40,
)


def variant(prompt: str) -> int | None:
    found = re.search(r"variant \d+-(\d+)", prompt)
    return None if found is None else int(found.group(1))


def pair(i: int, *, control_answer: int | None = None, target: str | None = None, answer: int | None = None) -> str:
    """A well-formed pair about dollars (target) and marbles (control) whose right answer is 15 + i."""
    t = target or f"Ana has ${10 + i} and earns $5 more. How many dollars does Ana have now?"
    c = f"Ana has {10 + i} marbles and finds 5 more. How many marbles does Ana have now?"
    sides = {"target": (t, answer if answer is not None else 15 + i), "control": (c, control_answer or 15 + i)}
    return json.dumps({k: {"question": q, "answer": str(a)} for k, (q, a) in sides.items()})


def solver(prompt: str) -> str:
    """The checker: the sum of the numbers of the question it is asked."""
    question = prompt.split("Question: ", 1)[1]
    return str(sum(int(n) for n in re.findall(r"\d+", question)))


def writer(write: Callable[[int], str]) -> Callable[[str], str]:
    """A model that writes pairs by `write(index)` and answers check prompts by `solver`."""
    return lambda prompt: write(i) if (i := variant(prompt)) is not None else solver(prompt)


@contextmanager
def generator(script: Script, **kw: Any) -> Iterator[LLMGenerator]:
    with serve(script) as url:
        config = ExplainConfig.model_validate({"endpoint": url, "model": "scripted-model", "retries": 0})
        completer = EndpointCompleter(config, role="generator", backoff_s=0.01, max_backoff_s=0.05)
        try:
            yield LLMGenerator(completer, **kw)
        finally:
            completer.close()


def posts(script: Script) -> list[dict[str, Any]]:
    return [r["body"] for r in script.requests if r["path"] == "/v1/chat/completions"]


def prompts_of(script: Script, generation: bool) -> list[str]:
    return [p for b in posts(script) if (variant(p := b["messages"][0]["content"]) is not None) == generation]


def test_well_formed_pairs_are_parsed_with_their_request_ids_and_checked() -> None:
    fenced = {2: lambda s: f"```json\n{s}\n```", 3: lambda s: f"```\n{s}```"}
    script = Script(writer(lambda i: fenced.get(i, str)(pair(i))))
    with generator(script) as gen:
        assert isinstance(gen, ItemGenerator) and gen.name == "endpoint:scripted-model"
        out = gen.generate(GAP, 4, seed=7)
    assert (out.requests, out.malformed, out.wrong_reference, out.note) == (4, 0, 0, "")
    assert [p.pair_id for p in out.pairs] == [f"mode:2/{i}" for i in range(4)]
    assert [p.request_id for p in out.pairs] == [f"mode:2/request-{i}" for i in range(4)]
    p = out.pairs[1]
    assert p.target_prompt.startswith("Ana has $11") and p.target_reference == "16" and p.control_reference == "16"
    assert p.scorer == "numeric" and p.generator == "endpoint:scripted-model" and p.seed == 7
    asked = prompts_of(script, generation=True)
    assert len(asked) == 4 and all("“$”, “dollars”" in q and "a number only" in q for q in asked)
    assert all("A pen costs $2. " + "x" * 284 + "\n" in q for q in asked)  # examples cut to 300 characters
    assert {f"variant 7-{i}" for i in range(4)} == {re.search(r"variant 7-\d+", q)[0] for q in asked}  # type: ignore[index]
    gen_posts = [b for b in posts(script) if variant(b["messages"][0]["content"]) is not None]
    assert all(b["response_format"] == pair_format() for b in gen_posts)
    assert len(prompts_of(script, generation=False)) == 8  # each side answered once by the checker


def test_malformed_answers_are_counted_dropped_and_made_up_for() -> None:
    bad = {
        1: lambda i: "Sure! " + pair(i),  # prose around the JSON
        2: lambda i: json.dumps({"target": {"question": "What?", "answer": "1"}}),  # no control
        4: lambda i: pair(i)[:-3],  # cut off
        5: lambda i: json.dumps(
            {"target": {"question": "Same?", "answer": "1"}, "control": {"question": "Same?", "answer": "2"}}
        ),
    }
    script = Script(writer(lambda i: bad.get(i, pair)(i)))
    with generator(script) as gen:
        out = gen.generate(GAP, 6, seed=0)
    # 6 requests (4 malformed), then 3 more (the budget: 1.5 × 6) for the 4 missing
    assert (out.requests, out.malformed, out.wrong_reference) == (9, 4, 0)
    assert [p.request_id.rsplit("-", 1)[1] for p in out.pairs] == ["0", "3", "6", "7", "8"]
    assert [p.pair_id for p in out.pairs] == [f"mode:2/{i}" for i in range(5)] and out.note == ""


def test_a_wrong_reference_is_caught_by_the_checker_and_by_computing_it() -> None:
    def write(i: int) -> str:
        if i == 1:
            return pair(i, control_answer=99)  # the checker answers 16
        if i == 2:  # plain arithmetic: computed (47), never asked
            return pair(i, target="What is 12 + 35? Answer with the number only.", answer=48)
        return pair(i)

    checker_script = Script(solver)
    script = Script(writer(write))
    with serve(checker_script) as url:
        checker = EndpointCompleter(ExplainConfig.model_validate({"endpoint": url, "model": "scripted-model"}))
        with generator(script, checker=checker, overdraw=1.0) as gen:
            out = gen.generate(GAP, 4, seed=0)
            unchecked = LLMGenerator(gen.completer, reference_check="none", overdraw=1.0).generate(GAP, 4, seed=0)
        checker.close()
    assert (out.requests, out.malformed, out.wrong_reference) == (4, 0, 2)
    assert [p.request_id for p in out.pairs] == ["mode:2/request-0", "mode:2/request-3"]
    assert prompts_of(script, generation=False) == []  # the second completer checked
    checked = [b["messages"][0]["content"] for b in posts(checker_script)]
    assert len(checked) == 7 and not any("12 + 35" in q for q in checked)
    assert unchecked.wrong_reference == 0 and len(unchecked.pairs) == 4


def test_a_majority_of_check_samples_must_agree() -> None:
    answers = iter(["16", "17", "99"] * 10)  # one of three samples agrees with the target's 16
    script = Script(writer(lambda i: pair(i)))
    script.answer = lambda p: pair(1) if variant(p) is not None else next(answers)
    with generator(script, check_samples=3, overdraw=1.0) as gen:
        out = gen.generate(GAP, 1, seed=0)
    assert out.wrong_reference == 1 and not out.pairs
    assert len(prompts_of(script, generation=False)) == 6


def test_a_gap_the_model_cannot_write_for_is_noted() -> None:
    script = Script(writer(lambda i: pair(i) if i == 0 else "I cannot write questions about this."))
    with generator(script) as gen:
        out = gen.generate(GAP, 4, seed=0)
    assert (out.requests, out.malformed, len(out.pairs)) == (6, 5, 1)
    assert out.note.startswith("the generator could not express this gap: 1 of 6 requests")


def test_the_same_seed_gives_the_same_pairs_and_prompts() -> None:
    def write(i: int) -> str:
        return pair(i) if i % 3 else "not json"

    runs = []
    for seed in (5, 5, 6):
        script = Script(writer(write))
        with generator(script) as gen:
            runs.append((gen.generate(GAP, 5, seed), sorted(prompts_of(script, generation=True))))
    assert runs[0] == runs[1]
    assert runs[0][1] != runs[2][1] and [p.target_prompt for p in runs[0][0].pairs] == [
        p.target_prompt for p in runs[2][0].pairs
    ]


@pytest.mark.parametrize(
    ("question", "value"),
    [
        ("What is 12 + 35? Answer with the number only.", "47"),
        ("Compute (7 - 10) * 3.", "-9"),
        ("What is 7 / 2?", "3.5"),
        ("What is 2 ** 99999?", None),  # not one of the operators run
        ("What is __import__('os')?", None),
        ("What is 12 apples + 3?", None),
        ("Ana has $12. What is 12 + 3?", None),  # a word problem: answered, not computed
    ],
)
def test_only_plain_arithmetic_is_computed(question: str, value: str | None) -> None:
    assert computed_answer(question) == value


def test_parsing_is_strict_and_the_scorer_is_one_that_reads_references() -> None:
    assert parse_pair(pair(0)) is not None and parse_pair("```json\n" + pair(0) + "\n```") is not None
    assert parse_pair('{"target": {"question": "Why?", "answer": "1"}, "control": {"question": "How?", "answer": 2}}')
    for bad in ("", "[]", pair(0) + " and more", json.loads(pair(0)) and pair(0).replace('"answer"', '"ans"')):
        assert parse_pair(bad) is None
    assert scorer_for(GAP) == "numeric"
    assert scorer_for(Gap(**{**GAP.__dict__, "scorer": "judge"})) == "exact"
    assert scorer_for(Gap(**{**GAP.__dict__, "scorer": "precomputed+multiple_choice"})) == "multiple_choice"


def test_a_server_without_structured_answers_still_gets_pairs_asked_in_prose() -> None:
    script = Script(writer(pair), refuse_format=400)
    with generator(script, reference_check="executed") as gen:
        out = gen.generate(GAP, 3, seed=0)
    assert len(out.pairs) == 3 and out.malformed == 0 and not gen.completer.structured  # type: ignore[attr-defined]
    assert prompts_of(script, generation=False) == []  # executed: nothing asked again
    assert "response_format" not in posts(script)[-1]


def test_from_config_writes_with_the_explainer_and_checks_with_the_judge() -> None:
    writer_script, judge_script = Script(writer(lambda i: pair(i, control_answer=99))), Script(solver)
    with serve(writer_script) as url, serve(judge_script) as judge_url:
        config = ExplainConfig.model_validate(
            {"endpoint": url, "model": "scripted-model", "judge_endpoint": judge_url, "retries": 0}
        )
        gen = LLMGenerator.from_config(config, overdraw=1.0)
        out = gen.generate(GAP, 2, seed=0)
        gen.close()
    assert gen.name == "endpoint:scripted-model" and out.wrong_reference == 2 and not out.pairs
    assert len(posts(judge_script)) == 4 and prompts_of(writer_script, generation=False) == []
