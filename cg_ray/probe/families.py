"""Programmatic item families: seeded minimal pairs with exact answers, written offline.

A family is a task (the embedded suite's probe kinds, `cg_ray/benchmarks/probes.py`); a property is what a
gap may be about within it. Each property draws a target that has it and a control that is the same draw
without it: the same numbers, words and format, changed only where the property lies. The draws start from
the suite's own generators (`probes.GENERATORS`) and rewrite their prompts, so a control reads like a suite
row; where the suite has only a few texts (its boolean logic rows, palindromes, letter counts) the family draws
new surface (variable names; words and phrasings), or its items would be copies of suite rows and of each other
and be dropped. Answers are computed, never asked of a model.

`match_family(gap)` picks a (family, property) for a gap by what its description and terms name, since a
failure mode's rows may span benchmarks and its terms say what they share:
1. a "$" or "dollar(s)": arithmetic / money (whatever its benchmark);
2. else the first property whose trigger words appear, the properties of its benchmark's family (the demo's
   `probes_<kind>`) tried first: "comma-separated" -> ordering / sorting, "taller" -> logic / chain,
   "not" -> logic / negation, "hours" -> unit_conversion / time_units;
3. else its benchmark's family with that family's first (default) property.
A gap matching none gets None: the LLM generator writes its items.
"""

from __future__ import annotations

import calendar
import datetime as dt
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from cg_ray.benchmarks.probes import GENERATORS, Probe
from cg_ray.benchmarks.sources import ProbeKind
from cg_ray.probe.items import Gap, GenerationOutcome, ItemPair

Draw = Callable[[random.Random], tuple[Probe, Probe]]  # (target, control)
MAX_REDRAWS = 200  # a draw of the wrong form is drawn again; every form is common, so this is never reached


def _base(rng: random.Random, kind: ProbeKind, fits: Callable[[Probe], bool]) -> Probe:
    """A suite probe of `kind` of the form the property needs (the generators mix forms)."""
    for _ in range(MAX_REDRAWS):
        probe = GENERATORS[kind](rng)
        if fits(probe):
            return probe
    raise RuntimeError(f"no {kind} probe of the wanted form in {MAX_REDRAWS} draws")


def _ints(p: Probe, *keys: str) -> list[int]:
    """Integer facts of a probe (its facts are typed `object`: they are metadata)."""
    return [int(str(p.facts[k])) for k in keys]


def _list(p: Probe, key: str) -> list[object]:
    value = p.facts[key]
    assert isinstance(value, list), f"{key} of a probe is a list"
    return value


def _item(prompt: str, answer: object, scorer: str, facts: dict[str, object]) -> Probe:
    return Probe(prompt, str(answer).lower() if isinstance(answer, bool) else str(answer), scorer, facts)


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def _large_numbers(rng: random.Random) -> tuple[Probe, Probe]:
    """The same operation and last digits, three more leading digits on each operand in the target."""
    base = _base(rng, "arithmetic", lambda p: True)
    (a, b), op = _ints(base, "a", "b"), str(base.facts["op"])
    big_a, big_b = (int(f"{rng.randint(100, 999)}{x}") for x in (a, b))
    target = base.prompt.replace(f"{a} {op} {b}", f"{big_a} {op} {big_b}")
    facts = {"a": big_a, "b": big_b, "op": op}
    return _item(target, _apply(big_a, op, big_b), "numeric", facts), base


_MONEY = {  # op: (with dollars, without), the same sentence around the same two numbers
    "+": ("{n} has ${a} and earns ${b} more. How many dollars does {n} have now?",
          "{n} has {a} marbles and finds {b} more. How many marbles does {n} have now?"),
    "-": ("{n} has ${a} and spends ${b}. How many dollars does {n} have left?",
          "{n} has {a} marbles and gives away {b}. How many marbles does {n} have left?"),
    "*": ("{n} buys {a} tickets at ${b} each. How many dollars does {n} pay?",
          "{n} fills {a} boxes with {b} marbles each. How many marbles does {n} use?"),
}  # fmt: skip
_PEOPLE = ("Ana", "Ben", "Chloe", "Dan", "Eva", "Femi")


def _money(rng: random.Random) -> tuple[Probe, Probe]:
    """A word problem about dollar amounts ("$12") vs the same numbers counting marbles."""
    base = _base(rng, "arithmetic", lambda p: True)
    (a, b), op = _ints(base, "a", "b"), str(base.facts["op"])
    a, b = (max(a, b), min(a, b)) if op == "-" else (a, b)  # nobody spends more than they have
    name, value = rng.choice(_PEOPLE), _apply(a, op, b)
    facts: dict[str, object] = {"a": a, "b": b, "op": op, "name": name}
    with_money, without = (f"{t.format(n=name, a=a, b=b)} Answer with the number only." for t in _MONEY[op])
    return _item(with_money, value, "numeric", facts), _item(without, value, "numeric", facts)


def _boolean(p: Probe) -> bool:
    return "p" in p.facts


# The suite's boolean rows have 8 texts (P, Q, and/or): drawn as they are, a family's items would be copies of
# suite rows and of each other. The pair's two variables are renamed instead, the same in target and control.
_VARIABLES = "BCDFGHJKLMNRSTVWXYZ"  # not P or Q (the suite's), nor A or I (read as words)


def _renamed(rng: random.Random) -> Callable[[str], str]:
    x, y = rng.sample(_VARIABLES, 2)
    return lambda text: re.sub(r"\b[PQ]\b", lambda m: x if m.group() == "P" else y, text)


def _negation(rng: random.Random) -> tuple[Probe, Probe]:
    """'(not X) and Y' vs 'X and Y' (the suite's 'P and Q', variables renamed), the same truth values."""
    base = _base(rng, "logic", _boolean)
    p, q, op = bool(base.facts["p"]), bool(base.facts["q"]), str(base.facts["op"])
    rename = _renamed(rng)
    target = base.prompt.replace(f"'P {op} Q'", f"'(not P) {op} Q'")
    value = (not p and q) if op == "and" else (not p or q)
    return _item(rename(target), value, "exact", {**base.facts, "not": True}), _item(
        rename(base.prompt), base.answer, "exact", base.facts
    )


def _false_operand(rng: random.Random) -> tuple[Probe, Probe]:
    """X is False in the target and True in the control; Y and the operator are the same (variables renamed)."""
    base = _base(rng, "logic", _boolean)
    q, op = bool(base.facts["q"]), str(base.facts["op"])
    rename = _renamed(rng)
    text = rename(base.prompt.replace(f"P is {base.facts['p']}", "P is {p}"))
    pair = [
        _item(text.format(p=p), (p and q) if op == "and" else (p or q), "exact", {**base.facts, "p": p})
        for p in (False, True)
    ]
    return pair[0], pair[1]


def _chain(rng: random.Random) -> tuple[Probe, Probe]:
    """An inference over the chain ("Is Alice taller than Carol?") vs a fact it states, with the same answer."""
    base = _base(rng, "logic", lambda p: "chain" in p.facts)
    a, b, c = map(str, _list(base, "chain"))
    yes = bool(base.facts["ask_first"])
    x, y = (a, c) if yes else (c, a)
    control = base.prompt.replace(
        f"Is {x} taller than {y}?", f"Is {a} taller than {b}?" if yes else f"Is {b} taller than {a}?"
    )
    return _item(base.prompt, base.answer, "exact", base.facts), _item(control, base.answer, "exact", base.facts)


# Words the suite does not ask about (its 21 words give few (word, letter) questions), each with a letter it
# has several times and one it has once.
_REPEATED_WORDS = (
    "apple", "cheese", "hello", "little", "summer", "rabbit", "butter", "kitten", "puzzle", "dinner", "happy",
    "bubble", "cookie", "pizza", "mirror", "carrot", "cotton", "ladder", "sheep", "school", "window", "button",
    "grammar", "elephant", "umbrella", "tennis", "hammer", "pillow", "teeth", "needle",
)  # fmt: skip


_LETTER_QUESTIONS = (  # besides the suite's own phrasing
    'Count the letter "{ch}" in "{w}". How many are there? Answer with a number.',
    'In the word "{w}", how often does the letter "{ch}" occur? Answer with a number.',
)


def _repeated_letter(rng: random.Random) -> tuple[Probe, Probe]:
    """A letter the word has several times vs one it has once, in the same word and phrasing (the suite's or
    one of two others)."""
    base = _base(rng, "letter_count", lambda p: True)
    word = rng.choice(_REPEATED_WORDS)
    suites = base.prompt.replace(f'letter "{base.facts["letter"]}"', 'letter "{ch}"')
    suites = suites.replace(f'word "{base.facts["word"]}"', 'word "{w}"')
    question = rng.choice((suites, *_LETTER_QUESTIONS)).replace("{w}", word)
    many = sorted({ch for ch in word if word.count(ch) > 1})
    once = sorted({ch for ch in word if word.count(ch) == 1})
    pair = [
        _item(question.format(ch=ch), word.count(ch), "numeric", {"word": word, "letter": ch})
        for ch in (rng.choice(many), rng.choice(once))
    ]
    return pair[0], pair[1]


# The suite asks about 12 palindromes and their "x" near misses in one phrasing: every such item is a suite row.
# The family draws palindromes the suite does not hold, a random changed last letter, and one of four phrasings
# (the suite's first), the same in target and control.
_NEW_PALINDROMES = (
    "repaper", "reviver", "rotator", "redder", "sagas", "solos", "minim", "peep", "deed", "kook", "gig", "bib",
    "dad", "mom", "nun", "pup", "tot", "toot", "eye", "ewe", "gag", "sees", "pip", "wow", "pop", "rotavator",
)  # fmt: skip
_PALINDROME_QUESTIONS = (
    'Is "{w}" a palindrome (the same read forwards and backwards)? Answer yes or no.',
    'Does the word "{w}" read the same forwards and backwards? Answer yes or no.',
    'Read backwards, is "{w}" spelled exactly as it is forwards? Answer yes or no.',
    'Is the string "{w}" a palindrome? Answer yes or no.',
)
_CONSONANTS = "bcdfghklmnprstvwxz"


def _near_miss(rng: random.Random) -> tuple[Probe, Probe]:
    """A palindrome with its last letter changed ("peek") vs the palindrome itself ("peep"): its first letter
    is the old last one, so the changed word is no palindrome."""
    word, question = rng.choice(_NEW_PALINDROMES), rng.choice(_PALINDROME_QUESTIONS)
    miss = word[:-1] + rng.choice(_CONSONANTS.replace(word[-1], ""))
    return _item(question.format(w=miss), "no", "exact", {"word": miss}), _item(
        question.format(w=word), "yes", "exact", {"word": word}
    )


def _month_end(rng: random.Random) -> tuple[Probe, Probe]:
    """The same number of days after a date late in its month (the answer is in the next) vs the 1st."""
    base = _base(rng, "date_arithmetic", lambda p: "start" in p.facts)
    start = dt.date.fromisoformat(str(base.facts["start"]))
    days = rng.randint(5, 25)
    last = calendar.monthrange(start.year, start.month)[1]
    pair = []
    for day in (last - days // 2, 1):
        begin = start.replace(day=day)
        text = base.prompt.replace(f"{base.facts['days']} days after {start.isoformat()}", f"{days} days after {begin}")
        pair.append(
            _item(text, (begin + dt.timedelta(days=days)).isoformat(), "exact", {"start": str(begin), "days": days})
        )
    return pair[0], pair[1]


_TIME = {"hours", "minutes", "seconds", "days"}
_METRIC = (("kilometers", "meters", 1000), ("meters", "centimeters", 100), ("kilograms", "grams", 1000))


def _time_units(rng: random.Random) -> tuple[Probe, Probe]:
    """The same value converted between units of time (factors 60, 24) vs between metric units."""
    base = _base(rng, "unit_conversion", lambda p: p.facts["from"] in _TIME)
    value, src, dst = base.facts["value"], base.facts["from"], base.facts["to"]
    m_src, m_dst, factor = rng.choice(_METRIC)
    control = base.prompt.replace(f"{dst} are in {value} {src}", f"{m_dst} are in {value} {m_src}")
    facts = {"value": value, "from": m_src, "to": m_dst, "factor": factor}
    return _item(base.prompt, base.answer, "numeric", base.facts), _item(
        control, int(str(value)) * factor, "numeric", facts
    )


def _sorting(rng: random.Random) -> tuple[Probe, Probe]:
    """Sorting a list vs naming its largest (or smallest) number: the same numbers in the same order."""
    target = _base(rng, "ordering", lambda p: p.facts["want"] == "sorted")
    pick = _base(rng, "ordering", lambda p: p.facts["want"] != "sorted")
    numbers, want = [int(str(x)) for x in _list(target, "numbers")], str(pick.facts["want"])
    control = pick.prompt.replace(", ".join(map(str, _list(pick, "numbers"))), ", ".join(map(str, numbers)))
    value = max(numbers) if want == "largest" else min(numbers)
    return _item(target.prompt, target.answer, "exact", target.facts), _item(
        control, value, "exact", {"numbers": numbers, "want": want}
    )


_CURRENCY = ("$", "dollar", "dollars")  # a gap about money is probed as money whatever its benchmark


@dataclass(frozen=True)
class Property:
    draw: Draw
    triggers: tuple[str, ...]  # words of a gap's description or terms that name this property


FAMILIES: dict[str, dict[str, Property]] = {  # a family's first property is its default
    "arithmetic": {
        "large_numbers": Property(_large_numbers, ("thousand", "million", "large number", "digits")),
        "money": Property(_money, (*_CURRENCY, "price", "cost")),
    },
    "logic": {
        "negation": Property(_negation, ("not", "negation", "negated")),
        "false_operand": Property(_false_operand, ("false",)),
        "chain": Property(_chain, ("taller",)),
    },
    "letter_count": {"repeated_letter": Property(_repeated_letter, ("letter", "appear", "times"))},
    "palindrome": {"near_miss": Property(_near_miss, ("palindrome",))},
    "date_arithmetic": {"month_end": Property(_month_end, ("days after", "date", "yyyy"))},
    "unit_conversion": {"time_units": Property(_time_units, ("hours", "minutes", "seconds"))},
    "ordering": {"sorting": Property(_sorting, ("sort", "sorted", "comma-separated", "smallest to largest"))},
}


FAMILY_PREFIX = "family:"  # a family's generator name: family:FAMILY.PROPERTY (items' and results' `generator`)


def family_writer(family: str, prop: str) -> str:
    """The generator name of a family's property, as items.parquet and results.parquet record it."""
    return f"{FAMILY_PREFIX}{family}.{prop}"


def is_family(generator: str) -> bool:
    """Whether a generator name (`family_writer`'s, or an LLM writer's `endpoint:MODEL`) is a family's."""
    return generator.startswith(FAMILY_PREFIX)


class FamilyGenerator:
    """Pairs of one family's property: the target has it, the control is the same draw without it."""

    def __init__(self, family: str, prop: str) -> None:
        if prop not in FAMILIES.get(family, {}):
            known = ", ".join(f"{f}/{p}" for f, ps in FAMILIES.items() for p in ps)
            raise ValueError(f"no item family {family}/{prop} (known: {known})")
        self.family, self.property = family, prop
        self.name = family_writer(family, prop)

    def generate(self, gap: Gap, n_pairs: int, seed: int) -> GenerationOutcome:
        # A str seed is hashed by random (sha512), the same in every process.
        rng = random.Random(f"{seed}:{gap.gap_id}:{self.family}:{self.property}")
        draw = FAMILIES[self.family][self.property].draw
        out = GenerationOutcome(requests=n_pairs)
        for i in range(n_pairs):
            target, control = draw(rng)
            pair_id = f"{gap.gap_id}/{i}"
            out.pairs.append(
                ItemPair(gap_id=gap.gap_id, pair_id=pair_id, generator=self.name, request_id=pair_id, seed=seed,
                         target_prompt=target.prompt, target_reference=target.answer, control_prompt=control.prompt,
                         control_reference=control.answer, scorer=target.scorer)
            )  # fmt: skip
        return out


def _mentions(text: str, trigger: str) -> bool:
    # Words match whole ("not" is not in "note"); a symbol ("$") anywhere.
    if not trigger[0].isalnum():
        return trigger in text
    return re.search(rf"\b{re.escape(trigger)}\b", text) is not None


def _family_of_benchmark(benchmark: str) -> str | None:
    # The demo names its benchmarks "<name>_<kind>" (`probes.load_probes`); the longest kind wins.
    kinds = sorted((k for k in FAMILIES if benchmark == k or benchmark.endswith(f"_{k}")), key=len)
    return kinds[-1] if kinds else None


def match_family(gap: Gap) -> FamilyGenerator | None:
    """A family and property for `gap` by the rules in the module's docstring; None when none fits."""
    text = " ".join((gap.description, *gap.terms)).casefold()
    if any(_mentions(text, t) for t in _CURRENCY):
        return FamilyGenerator("arithmetic", "money")
    home = _family_of_benchmark(gap.benchmark)
    order = ([home] if home else []) + [f for f in FAMILIES if f != home]  # the benchmark's family first
    for family in order:
        for name, prop in FAMILIES[family].items():
            if any(_mentions(text, t) for t in prop.triggers):
                return FamilyGenerator(family, name)
    return FamilyGenerator(home, next(iter(FAMILIES[home]))) if home else None
