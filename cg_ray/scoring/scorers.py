"""Pure scorers: ``score(response, reference, choices, **options) -> float in [0, 1] | None``.

``reference`` is the list of acceptable gold answers. ``None`` means "could not parse an answer": the row
scores 0 and is counted; a benchmark where no answer parses at all fails the run (``apply.py``).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from decimal import Decimal

from cg_ray.scoring.text import extract_answer, extract_number, last_number, normalize, parse_number


def _loose(text: str) -> str:
    # For answers made only of punctuation (BBH dyck_languages: "] ]"), normalize() would erase them.
    return " ".join(text.casefold().split())


def exact_match(response: str | None, reference: Sequence[str], choices: Sequence[str] | None = None) -> float | None:
    """Normalized exact match of the extracted answer (or the whole response) against any reference."""
    if response is None or not response.strip():
        return None
    candidates = {extract_answer(response), response.strip()}
    for gold in reference:
        gold_norm = normalize(gold)
        for cand in candidates:
            if (gold_norm and normalize(cand) == gold_norm) or (not gold_norm and _loose(cand) == _loose(gold)):
                return 1.0
    return 0.0


def numeric(
    response: str | None,
    reference: Sequence[str],
    choices: Sequence[str] | None = None,
    *,
    rel_tol: float = 1e-6,
    abs_tol: float = 1e-6,
) -> float | None:
    """GSM8K-style: the number after ``####`` / "the answer is" / "A:", else the last number; equal to the
    reference's number within the tolerance."""
    if response is None:
        return None
    pred = extract_number(response)
    if pred is None:
        return None
    for gold_text in reference:
        gold = parse_number(gold_text)
        gold = gold if gold is not None else last_number(gold_text)
        if gold is not None and _close(pred, gold, rel_tol, abs_tol):
            return 1.0
    return 0.0


def _close(a: Decimal, b: Decimal, rel_tol: float, abs_tol: float) -> bool:
    diff = abs(a - b)
    return diff <= Decimal(str(abs_tol)) or diff <= Decimal(str(rel_tol)) * max(abs(a), abs(b))


_LETTER_IN_PARENS = re.compile(r"\(([A-Z])\)")
_LEADING_LETTER = re.compile(r"^\s*([A-Z])(?:[.):]|\s|$)")
_GOLD_LETTER = re.compile(r"^\(?([A-Z])\)?$")
_CHOICE_PREFIX = re.compile(r"^\s*\(?[A-Z]\)\s*")


def _strip_prefix(choice: str) -> str:
    # AGIEval choices carry their own letter: "(A)5(√3 + 1)".
    return _CHOICE_PREFIX.sub("", choice)


def _predicted_index(span: str, choices: Sequence[str] | None) -> int | None:
    n = len(choices) if choices else 26
    for pattern in (_LETTER_IN_PARENS, _LEADING_LETTER):
        match = pattern.search(span)
        if match and string.ascii_uppercase.index(match[1]) < n:
            return string.ascii_uppercase.index(match[1])
    if not choices:
        return None
    # Else the choice whose text appears first (as whole words) in the answer span.
    text = f" {normalize(span)} "
    found = []
    for i, choice in enumerate(choices):
        needle = normalize(_strip_prefix(choice))
        pos = text.find(f" {needle} ") if needle else -1
        if pos >= 0:
            found.append((pos, -len(needle), i))  # earliest first; on a tie the longer choice
    return min(found)[2] if found else None


def _gold_index(gold: str, choices: Sequence[str] | None) -> int | None:
    match = _GOLD_LETTER.match(gold.strip())
    if match:
        return string.ascii_uppercase.index(match[1])
    if choices:
        norm = normalize(gold)
        for i, choice in enumerate(choices):
            if normalize(_strip_prefix(choice)) == norm:
                return i
    return None


def multiple_choice(
    response: str | None, reference: Sequence[str], choices: Sequence[str] | None = None
) -> float | None:
    """The answer as a letter ("(B)", "B.", "Answer: B") or as the text of a choice; gold is a letter or a
    choice text. The first letter/choice found in the answer span counts."""
    if response is None or not response.strip():
        return None
    span = extract_answer(response)
    pred = _predicted_index(span, choices)
    if pred is None and span != response.strip():
        pred = _predicted_index(response, choices)
    if pred is None:
        return None
    golds = [_gold_index(g, choices) for g in reference]
    if all(g is None for g in golds):
        return None
    return 1.0 if pred in golds else 0.0


def any_of(
    response: str | None,
    reference: Sequence[str],
    choices: Sequence[str] | None = None,
    *,
    mode: str = "contains",
) -> float | None:
    """NQ-open: correct if any acceptable answer appears (as whole words) in the normalized response
    (``mode: contains``) or equals the extracted answer (``mode: exact``)."""
    if response is None or not response.strip():
        return None
    if mode == "exact":
        return exact_match(response, reference)
    text = f" {normalize(response)} "
    return 1.0 if any(normalize(g) and f" {normalize(g)} " in text for g in reference) else 0.0


def precomputed(response: str | None, reference: Sequence[str], choices: Sequence[str] | None = None) -> float | None:
    """Rows scored upstream carry their score and never reach a scorer; reaching here means a row of a
    ``precomputed`` benchmark had no score."""
    return None
