"""Programmatic families: exact answers (recomputed here and scored by the suite's scorers), controls that
differ from their targets only in the property, seeded draws, and the family a gap is matched to."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from pathlib import Path

import pytest

from cg_ray.benchmarks.probes import load_probes
from cg_ray.pipeline.config import load_run_config
from cg_ray.probe.families import FAMILIES, FamilyGenerator, is_family, match_family
from cg_ray.probe.items import Gap, ItemPair
from cg_ray.scoring import score_one

ROOT = Path(__file__).resolve().parents[2]
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
    assert all(is_family(p.generator) for p in got) and not is_family("endpoint:family:x")  # the prefix only
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
        (x, vx), (y, vy) = re.findall(r"\b([A-Z]) is (True|False)", p.target_prompt)
        assert x != y and not {x, y} & {"P", "Q", "A", "I"}  # renamed from the suite's P and Q
        assert p.target_prompt.replace(f"(not {x})", x) == p.control_prompt
        op = "and" if f" and {y}'" in p.target_prompt else "or"
        assert f"'(not {x}) {op} {y}'" in p.target_prompt
        assert p.target_reference == str(eval(f"(not {vx}) {op} {vy}")).lower() and p.scorer == "exact"
        assert p.control_reference == str(eval(f"{vx} {op} {vy}")).lower()


def test_the_other_families_change_only_their_property() -> None:
    for p in pairs("logic", "false_operand"):
        x = re.findall(r"If ([A-Z]) is False", p.target_prompt)[0]
        assert p.target_prompt.replace(f"{x} is False", f"{x} is True") == p.control_prompt
    for p in pairs("palindrome", "near_miss"):
        assert (p.target_reference, p.control_reference) == ("no", "yes")
        (miss,), (word,) = (re.findall(r'"(\w+)"', t) for t in (p.target_prompt, p.control_prompt))
        assert word == word[::-1] and miss != miss[::-1] and miss[:-1] == word[:-1]
        assert p.target_prompt.replace(f'"{miss}"', f'"{word}"') == p.control_prompt
    for p in pairs("letter_count", "repeated_letter"):
        (t_letter, word), (c_letter, c_word) = (
            sorted(re.findall(r'"(\w+)"', x), key=len) for x in (p.target_prompt, p.control_prompt)
        )
        assert word == c_word and p.target_prompt.replace(f'"{t_letter}"', f'"{c_letter}"') == p.control_prompt
        assert int(p.target_reference) == word.count(t_letter) >= 2 and int(p.control_reference) == 1
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


@pytest.mark.parametrize(("family", "prop"), ALL)
def test_most_pairs_are_new_text_not_suite_rows_or_repeats(family: str, prop: str) -> None:
    """The probe drops a family pair whose target or control is literally a suite row or an earlier item
    (cg_ray/probe/run.py `check`): on the embedded default suite (jobs/default.yaml, 280 rows), at least 40 of
    60 pairs survive (drawn from the suite's 8 boolean texts and 12 palindromes, negation, false_operand and
    near_miss had kept 0, 0 and 2 of 60; repeated_letter 12)."""
    sources = load_run_config(ROOT / "jobs/default.yaml").benchmarks
    suite = {row["prompt"] for source in sources for row in load_probes(source)}
    fresh = 0
    seen: dict[str, set[str]] = {"target": set(suite), "control": set(suite)}
    for p in pairs(family, prop, 60):
        texts = {"target": p.target_prompt, "control": p.control_prompt}
        fresh += all(texts[role] not in seen[role] for role in texts)
        for role, text in texts.items():
            seen[role].add(text)
    assert fresh >= 40, (family, prop, fresh)


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
