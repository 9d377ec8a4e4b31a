"""Programmatic families: exact answers (recomputed here and scored by the suite's scorers), controls that
differ from their targets only in the property, seeded draws, and the family a gap is matched to."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

import pytest

from cg_ray.probe.families import FAMILIES, FamilyGenerator, match_family
from cg_ray.probe.items import Gap, ItemPair
from cg_ray.scoring import score_one

ALL = [(f, p) for f, props in FAMILIES.items() for p in props]


def gap(benchmark: str = "probes_arithmetic", description: str = "Rows with “x”", *terms: str) -> Gap:
    return Gap("mode:1", "mode", (7,), description, terms, (), benchmark, "numeric", -0.2, True, 30)


def pairs(family: str, prop: str, n: int = 30, seed: int = 0) -> list[ItemPair]:
    out = FamilyGenerator(family, prop).generate(gap(), n, seed)
    assert out.requests == n and out.malformed == 0 and out.wrong_reference == 0 and not out.note
    return out.pairs


def numbers(text: str) -> list[str]:
    return re.findall(r"\d+", text)


@pytest.mark.parametrize(("family", "prop"), ALL)
def test_every_reference_scores_as_right_and_a_wrong_answer_as_wrong(family: str, prop: str) -> None:
    got = pairs(family, prop)
    assert [p.pair_id for p in got] == [f"mode:1/{i}" for i in range(30)]
    assert all(p.generator == f"family:{family}.{prop}" for p in got)
    for p in got:
        assert p.target_prompt != p.control_prompt
        for reference in (p.target_reference, p.control_reference):
            assert score_one(p.scorer, f"The answer is {reference}", [reference]) == 1.0
            assert score_one(p.scorer, "The answer is 999999999999", [reference]) == 0.0


@pytest.mark.parametrize(("family", "prop"), ALL)
def test_the_same_seed_gives_the_same_pairs_and_another_seed_others(family: str, prop: str) -> None:
    assert pairs(family, prop, 10, seed=3) == pairs(family, prop, 10, seed=3)
    assert pairs(family, prop, 10, seed=3) != pairs(family, prop, 10, seed=4)


def test_money_is_the_same_problem_with_dollars_and_an_exact_answer() -> None:
    for p in pairs("arithmetic", "money"):
        assert "$" in p.target_prompt and "$" not in p.control_prompt and "dollar" not in p.control_prompt
        assert numbers(p.target_prompt) == numbers(p.control_prompt)
        a, b = map(int, numbers(p.target_prompt))
        op = "-" if "spends" in p.target_prompt else "*" if "each" in p.target_prompt else "+"
        assert int(p.target_reference) == int(p.control_reference) == eval(f"{a} {op} {b}")
        assert int(p.target_reference) >= 0


def test_large_numbers_keep_the_operation_and_last_digits() -> None:
    for p in pairs("arithmetic", "large_numbers"):
        expr = re.compile(r"What is (\d+) ([-+*]) (\d+)\?")
        (ta, top, tb), (ca, cop, cb) = expr.findall(p.target_prompt)[0], expr.findall(p.control_prompt)[0]
        assert top == cop and ta.endswith(ca) and tb.endswith(cb) and len(ta) == len(ca) + 3
        assert expr.sub("", p.target_prompt) == expr.sub("", p.control_prompt)
        assert int(p.target_reference) == eval(f"{ta} {top} {tb}")
        assert int(p.control_reference) == eval(f"{ca} {cop} {cb}")


def test_negation_adds_not_to_the_same_truth_values() -> None:
    for p in pairs("logic", "negation"):
        assert p.target_prompt.replace("(not P)", "P") == p.control_prompt
        vals = dict(re.findall(r"([PQ]) is (True|False)", p.target_prompt))
        op = "and" if " and Q'" in p.target_prompt else "or"
        want = eval(f"(not {vals['P']}) {op} {vals['Q']}")
        assert p.target_reference == str(want).lower() and p.scorer == "exact"


def test_the_other_families_change_only_their_property() -> None:
    for p in pairs("logic", "false_operand"):
        assert (
            "P is False" in p.target_prompt and p.target_prompt.replace("P is False", "P is True") == p.control_prompt
        )
    for p in pairs("palindrome", "near_miss"):
        assert (p.target_reference, p.control_reference) == ("no", "yes")
        assert len(p.target_prompt) == len(p.control_prompt)
    for p in pairs("letter_count", "repeated_letter"):
        assert int(p.target_reference) >= 2 and int(p.control_reference) == 1
        assert re.findall(r'word "(\w+)"', p.target_prompt) == re.findall(r'word "(\w+)"', p.control_prompt)
    for p in pairs("date_arithmetic", "month_end"):
        (t_days, t_start), (c_days, c_start) = (
            re.findall(r"(\d+) days after (\S+)\?", x)[0] for x in (p.target_prompt, p.control_prompt)
        )
        assert t_days == c_days and t_start[:7] == c_start[:7] and c_start.endswith("-01")
        assert p.target_reference[:7] != t_start[:7] and p.control_reference[:7] == c_start[:7]
        assert dt.date.fromisoformat(p.target_reference) - dt.date.fromisoformat(t_start) == dt.timedelta(int(t_days))
    for p in pairs("ordering", "sorting"):
        listed = re.findall(r"\d+(?:, \d+)+", p.target_prompt)[0]
        assert listed in p.control_prompt and p.control_reference in listed.split(", ")
        assert p.target_reference == ", ".join(map(str, sorted(map(int, listed.split(", ")))))
    for p in pairs("unit_conversion", "time_units"):
        assert numbers(p.target_prompt) == numbers(p.control_prompt)
        assert re.search(r"hours|minutes|seconds", p.target_prompt) and not re.search(
            r"hours|minutes|seconds", p.control_prompt
        )


@pytest.mark.parametrize(
    ("benchmark", "description", "terms", "want"),
    [
        ("gsm8k", "Rows with “$”", ("$",), "arithmetic.money"),
        ("probes_arithmetic", "Rows with “dollars”", (), "arithmetic.money"),
        ("probes_arithmetic", "Rows where concepts 3016, 110 fire", (), "arithmetic.large_numbers"),
        ("probes_logic", "Rows with “false and”, “answer true”", ("false and", "answer true"), "logic.false_operand"),
        ("probes_logic", "Rows with “alice”, “is taller”", ("alice", "is taller", "taller than"), "logic.chain"),
        ("probes_letter_count", "Rows with “hours”, “60”", ("hours", "60"), "unit_conversion.time_units"),
        ("probes_letter_count", "Rows where concepts 3, 4 fire", (), "letter_count.repeated_letter"),
        (
            "probes_palindrome",
            "Rows with “is palindrome”, “10 times”",
            ("is palindrome", "10 times"),
            "palindrome.near_miss",
        ),
        ("probes_ordering", "Rows with “comma-separated list”", ("comma-separated list",), "ordering.sorting"),
        ("bbh_boolean", "Rows with “not”", ("not",), "logic.negation"),
        ("mmlu", "Rows with “note”", ("note",), None),
        ("mmlu", "Rows with “poetry”", (), None),
    ],
)
def test_a_gap_is_matched_by_currency_then_its_terms_then_its_benchmark(
    benchmark: str, description: str, terms: tuple[str, ...], want: str | None
) -> None:
    got = match_family(gap(benchmark, description, *terms))
    assert (got.name.removeprefix("family:") if got else None) == want


def test_an_unknown_family_or_property_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="arithmetic/money"):
        FamilyGenerator("arithmetic", "poetry")
    assert dataclasses.is_dataclass(FamilyGenerator("logic", "chain").generate(gap(), 1, 0))
