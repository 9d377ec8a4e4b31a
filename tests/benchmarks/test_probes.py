"""The probe suite's answers, recomputed independently from the prompt text alone."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest

from cg_ray.benchmarks import load_source
from cg_ray.benchmarks.probes import generate_probes
from cg_ray.benchmarks.sources import PROBE_KINDS, ProbesSource

UNITS = {  # how many of the second unit are in one of the first
    ("kilometers", "meters"): 1000,
    ("meters", "centimeters"): 100,
    ("hours", "minutes"): 60,
    ("minutes", "seconds"): 60,
    ("kilograms", "grams"): 1000,
    ("liters", "milliliters"): 1000,
    ("feet", "inches"): 12,
    ("days", "hours"): 24,
}


def solve(prompt: str) -> str:
    if m := re.fullmatch(r"What is (\d+) ([-+*]) (\d+)\? Answer with the number only\.", prompt):
        a, op, b = int(m[1]), m[2], int(m[3])
        return str({"+": a + b, "-": a - b, "*": a * b}[op])
    if m := re.fullmatch(
        r'How many times does the letter "(.)" appear in the word "(\w+)"\? Answer with a number\.', prompt
    ):
        return str(sum(1 for ch in m[2] if ch == m[1]))
    if m := re.fullmatch(r'Is "(\w+)" a palindrome .*', prompt):
        w = m[1]
        return "yes" if all(w[i] == w[-1 - i] for i in range(len(w) // 2)) else "no"
    if m := re.fullmatch(r"What date is (\d+) days after (\d{4}-\d\d-\d\d)\? .*", prompt):
        return dt.date.fromordinal(dt.date.fromisoformat(m[2]).toordinal() + int(m[1])).isoformat()
    if m := re.fullmatch(r"It is (\d\d):(\d\d)\. What time will it be in (\d+) minutes\? .*", prompt):
        total = (int(m[1]) * 60 + int(m[2]) + int(m[3])) % 1440
        return f"{total // 60:02d}:{total % 60:02d}"
    if m := re.fullmatch(r"How many (\w+) are in (\d+) (\w+)\? .*", prompt):
        return str(int(m[2]) * UNITS[(m[3], m[1])])
    if m := re.fullmatch(r"Which is the (largest|smallest) of these numbers: ([\d, ]+)\? .*", prompt):
        nums = [int(x) for x in m[2].split(", ")]
        return str(max(nums) if m[1] == "largest" else min(nums))
    if m := re.fullmatch(r"Sort these numbers from smallest to largest: ([\d, ]+)\. .*", prompt):
        return ", ".join(str(n) for n in sorted(int(x) for x in m[1].split(", ")))
    if m := re.fullmatch(
        r"(\w+) is taller than (\w+)\. (\w+) is taller than (\w+)\. Is (\w+) taller than (\w+)\? .*", prompt
    ):
        rank = {m[1]: 0, m[2]: 1, m[4]: 2}
        return "yes" if rank[m[5]] < rank[m[6]] else "no"
    if m := re.fullmatch(r"If P is (True|False) and Q is (True|False), is 'P (and|or) Q' true or false\? .*", prompt):
        p, q = m[1] == "True", m[2] == "True"
        return "true" if (p and q if m[3] == "and" else p or q) else "false"
    raise AssertionError(f"unrecognised probe: {prompt}")


@pytest.mark.parametrize("kind", PROBE_KINDS)
def test_answers_are_right(kind: str) -> None:
    probes = generate_probes(kind, 200, seed=3)  # type: ignore[arg-type]
    for probe in probes:
        assert solve(probe.prompt) == probe.answer, probe
        if probe.choices is not None:
            assert probe.answer in probe.choices


def test_suite_is_deterministic_and_seed_dependent() -> None:
    src = ProbesSource(kind="probes", per_kind=20, seed=7)
    a, b = load_source(src), load_source(src)
    assert a == b
    other = load_source(src.model_copy(update={"seed": 8}))
    assert [r["prompt"] for r in a] != [r["prompt"] for r in other]


def test_suite_shape() -> None:
    rows = load_source(ProbesSource(kind="probes", per_kind=10))
    assert len(PROBE_KINDS) >= 6 and len(rows) == 10 * len(PROBE_KINDS)
    assert {r["benchmark"] for r in rows} == {f"probes_{k}" for k in PROBE_KINDS}
    assert len({r["row_id"] for r in rows}) == len(rows)
    assert {r["scorer"] for r in rows} == {"numeric", "exact", "multiple_choice"}
    for r in rows:
        assert len(r["reference"]) == 1 and json.loads(r["metadata"])["kind"] in PROBE_KINDS
    # Not degenerate: answers vary within each kind.
    for kind in PROBE_KINDS:
        answers = {r["reference"][0] for r in rows if r["benchmark"] == f"probes_{kind}"}
        assert len(answers) >= 2, kind
