"""Answer extraction and normalization shared by the scorers."""

from __future__ import annotations

import re
import string
import unicodedata
from decimal import Decimal, InvalidOperation

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
# "The answer is X." / "Answer: X" / "A: X" (GSM8K-style few-shot) / "#### X" (GSM8K's own marker).
_ANSWER_MARKERS = (
    re.compile(r"####\s*(?P<ans>[^\n]+)"),
    re.compile(r"(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)\s*(?P<ans>[^\n]+)", re.IGNORECASE),
    re.compile(r"(?:^|\n)\s*A:\s*(?P<ans>[^\n]+)"),
)
_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def normalize(text: str) -> str:
    """SQuAD-style: casefold, drop punctuation and articles, collapse whitespace (NFKC first)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = text.translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def extract_answer(response: str) -> str:
    """The span after the LAST answer marker (models often restate the question first), else the whole
    response; trailing sentence punctuation is dropped."""
    for pattern in _ANSWER_MARKERS:
        matches = list(pattern.finditer(response))
        if matches:
            return matches[-1]["ans"].strip().rstrip(".").strip()
    return response.strip()


def parse_number(token: str) -> Decimal | None:
    cleaned = token.replace(",", "").replace("$", "").strip()
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def last_number(text: str) -> Decimal | None:
    for match in reversed(_NUMBER.findall(text)):
        value = parse_number(match)
        if value is not None:
            return value
    return None


def extract_number(response: str) -> Decimal | None:
    """GSM8K-style: the number after the last answer marker if there is one, else the last number."""
    span = extract_answer(response)
    return last_number(span) if span != response.strip() and last_number(span) is not None else last_number(response)
