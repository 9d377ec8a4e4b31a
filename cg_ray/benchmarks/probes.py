"""The embedded default probe suite: seeded generators with exact answers, one benchmark per kind.

Written by the project (no external data), so the main job runs on a fresh machine with no network.
Every generator draws only from its own ``random.Random(seed, kind)``: the same seed gives the same rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from collections.abc import Callable, Iterator
from typing import NamedTuple

from cg_ray.benchmarks.rows import BenchmarkRow, make_row
from cg_ray.benchmarks.sources import ProbeKind, ProbesSource


class Probe(NamedTuple):
    prompt: str
    answer: str
    scorer: str
    facts: dict[str, object]  # the drawn parameters, kept as metadata so tests can recompute the answer
    choices: tuple[str, ...] | None = None  # closed answer sets are scored as multiple choice


def _arithmetic(rng: random.Random) -> Probe:
    op = rng.choice("+-*")
    digits = rng.randint(2, 4) if op != "*" else rng.randint(2, 3)
    a = rng.randint(10 ** (digits - 1), 10**digits - 1)
    b = rng.randint(10 ** (digits - 1), 10**digits - 1)
    value = a + b if op == "+" else a - b if op == "-" else a * b
    prompt = f"What is {a} {op} {b}? Answer with the number only."
    return Probe(prompt, str(value), "numeric", {"a": a, "b": b, "op": op})


_WORDS = (
    "banana", "strawberry", "mississippi", "bookkeeper", "committee", "balloon", "occurrence", "address",
    "parallel", "assessment", "tomorrow", "raccoon", "coffee", "success", "pepper", "letter", "bottle",
    "yellow", "cinnamon", "giraffe", "accommodation",
)  # fmt: skip


def _letter_count(rng: random.Random) -> Probe:
    word = rng.choice(_WORDS)
    # Ask about a letter the word contains more often than not, so answers are rarely 0.
    letter = rng.choice(word) if rng.random() < 0.8 else rng.choice("abcdefghijklmnopqrstuvwxyz")
    prompt = f'How many times does the letter "{letter}" appear in the word "{word}"? Answer with a number.'
    return Probe(prompt, str(word.count(letter)), "numeric", {"word": word, "letter": letter})


_PALINDROMES = (
    "level", "radar", "rotor", "civic", "kayak", "refer", "madam", "racecar", "noon", "stats", "tenet", "deified",
)  # fmt: skip


def _palindrome(rng: random.Random) -> Probe:
    # Half palindromes, half near-misses and ordinary words.
    pool = _PALINDROMES if rng.random() < 0.5 else (*_WORDS, *(p[:-1] + "x" for p in _PALINDROMES))
    word = rng.choice(pool)
    prompt = f'Is "{word}" a palindrome (the same read forwards and backwards)? Answer yes or no.'
    return Probe(prompt, "yes" if word == word[::-1] else "no", "multiple_choice", {"word": word}, ("yes", "no"))


def _date_arithmetic(rng: random.Random) -> Probe:
    if rng.random() < 0.5:
        start = dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(0, 9000))
        days = rng.randint(1, 60)
        end = start + dt.timedelta(days=days)
        prompt = f"What date is {days} days after {start.isoformat()}? Answer in the format YYYY-MM-DD."
        return Probe(prompt, end.isoformat(), "exact", {"start": start.isoformat(), "days": days})
    hour, minute = rng.randint(0, 23), rng.choice(range(0, 60, 5))
    delta = rng.randint(5, 600)
    total = (hour * 60 + minute + delta) % (24 * 60)
    answer = f"{total // 60:02d}:{total % 60:02d}"
    prompt = f"It is {hour:02d}:{minute:02d}. What time will it be in {delta} minutes? Answer as HH:MM (24-hour)."
    return Probe(prompt, answer, "exact", {"time": f"{hour:02d}:{minute:02d}", "minutes": delta})


# (unit from, unit to, factor): value_to = value_from * factor, with exact integer factors.
_CONVERSIONS = (
    ("kilometers", "meters", 1000),
    ("meters", "centimeters", 100),
    ("hours", "minutes", 60),
    ("minutes", "seconds", 60),
    ("kilograms", "grams", 1000),
    ("liters", "milliliters", 1000),
    ("feet", "inches", 12),
    ("days", "hours", 24),
)


def _unit_conversion(rng: random.Random) -> Probe:
    src, dst, factor = rng.choice(_CONVERSIONS)
    value = rng.randint(2, 99)
    prompt = f"How many {dst} are in {value} {src}? Answer with the number only."
    return Probe(prompt, str(value * factor), "numeric", {"value": value, "from": src, "to": dst, "factor": factor})


def _ordering(rng: random.Random) -> Probe:
    numbers = rng.sample(range(1, 1000), rng.randint(3, 5))
    if rng.random() < 0.5:
        want = rng.choice(("largest", "smallest"))
        value = max(numbers) if want == "largest" else min(numbers)
        prompt = f"Which is the {want} of these numbers: {', '.join(map(str, numbers))}? Answer with the number."
        return Probe(prompt, str(value), "numeric", {"numbers": numbers, "want": want})
    listed = ", ".join(map(str, numbers))
    prompt = f"Sort these numbers from smallest to largest: {listed}. Answer as a comma-separated list."
    return Probe(prompt, ", ".join(map(str, sorted(numbers))), "exact", {"numbers": numbers, "want": "sorted"})


_NAMES = ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank")


def _logic(rng: random.Random) -> Probe:
    a, b, c = rng.sample(_NAMES, 3)
    if rng.random() < 0.5:
        # Transitivity of "taller than": the answer follows from the two facts.
        ask_first = rng.random() < 0.5
        x, y = (a, c) if ask_first else (c, a)
        prompt = f"{a} is taller than {b}. {b} is taller than {c}. Is {x} taller than {y}? Answer yes or no."
        facts = {"chain": [a, b, c], "ask_first": ask_first}
        return Probe(prompt, "yes" if ask_first else "no", "multiple_choice", facts, ("yes", "no"))
    p, q = rng.choice((True, False)), rng.choice((True, False))
    op = rng.choice(("and", "or"))
    value = (p and q) if op == "and" else (p or q)
    prompt = f"If P is {p} and Q is {q}, is 'P {op} Q' true or false? Answer true or false."
    return Probe(prompt, str(value).lower(), "multiple_choice", {"p": p, "q": q, "op": op}, ("true", "false"))


GENERATORS: dict[ProbeKind, Callable[[random.Random], Probe]] = {
    "arithmetic": _arithmetic,
    "letter_count": _letter_count,
    "palindrome": _palindrome,
    "date_arithmetic": _date_arithmetic,
    "unit_conversion": _unit_conversion,
    "ordering": _ordering,
    "logic": _logic,
}


def _rng(seed: int, kind: str) -> random.Random:
    # A stable per-kind seed (str hashing is salted per process, so hash it ourselves).
    digest = hashlib.sha256(f"{seed}:{kind}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def generate_probes(kind: ProbeKind, n: int, seed: int = 0) -> list[Probe]:
    rng = _rng(seed, kind)
    return [GENERATORS[kind](rng) for _ in range(n)]


def load_probes(source: ProbesSource) -> Iterator[BenchmarkRow]:
    for kind in source.kinds:
        benchmark = f"{source.benchmark or 'probes'}_{kind}"
        rng = _rng(source.seed, kind)  # one probe at a time (as generate_probes draws them): a large suite is
        for i in range(min(source.per_kind, source.limit or source.per_kind)):  # never all in memory
            probe = GENERATORS[kind](rng)
            yield make_row(
                row_id=f"{benchmark}-{source.seed}-{i}",
                benchmark=benchmark,
                prompt=probe.prompt
                if source.prompt_template is None
                else source.prompt_template.replace("{prompt}", probe.prompt),
                reference=[probe.answer],
                choices=probe.choices,
                scorer=probe.scorer,
                metadata={"kind": kind, "seed": source.seed, "index": i, "facts": probe.facts},
            )
