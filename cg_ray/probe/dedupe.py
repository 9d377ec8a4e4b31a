"""Near copies: a probe item must not be a near copy of a suite row (the model may have seen it, and it would
not be new data) nor of another item (two copies are one observation counted twice).

A text is its set of word n-grams (N = 5): lowercase word tokens, punctuation dropped, every number one
token "0" — a generator that copies a row and changes its numbers has still copied it. An item is a near copy
of another text when at least THRESHOLD of its n-grams occur in that text (containment, not Jaccard: an item
copied out of a longer row is a copy however much of the row it left out).

THRESHOLD = 0.5: one changed word removes at most N of a text's n-grams, so a 30-word item (26 n-grams) with
two names changed still shares ≥ 16/26 = 62% of them, while two independently written texts on one task share
a few percent at most (five words in a row in the same order rarely recur outside copying and boilerplate), and
a paraphrase that rewords every few words keeps almost none.

A text under N words has too little text for a partial overlap to mean anything: its one "n-gram" is its whole
token sequence, so it is a near copy only of a text equal to it after the normalisation.

Boilerplate: an n-gram found in more than max(COMMON_ROWS, COMMON_SHARE × rows) suite rows is the benchmark's
template ("answer with the letter of the correct option"), and one found in more items than that is the
generator's; neither is copied content, so it counts neither for nor against an item. This also bounds the
work: the index is built over the items' n-grams only (a few thousand items), the suite is streamed past it
once, and no n-gram's posting list grows past that cap.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

N = 5
THRESHOLD = 0.5
COMMON_ROWS = 200  # an n-gram in more suite rows than this (or COMMON_SHARE of them) is template
COMMON_SHARE = 0.002

_WORD = re.compile(r"[^\W_]+")  # letters and digits: punctuation and underscores split words


@dataclass(frozen=True)
class NearCopy:
    """What an item copies: a suite row or an earlier item (by index), and the share of its n-grams found there."""

    source: Literal["suite", "item"]
    index: int
    overlap: float


def tokens(text: str) -> list[str]:
    """Lowercase word tokens, every all-digit token replaced by "0"."""
    return ["0" if t.isdigit() else t for t in _WORD.findall(text.lower())]


def ngrams(text: str, n: int = N) -> set[int]:
    """The hashed word n-grams of a text; under n words, the hash of its whole token sequence (empty text:
    none). Python's hash of a tuple of strings is salted per process, which is fine: every set compared is
    built in this one."""
    words = tokens(text)
    if len(words) < n:
        return {hash(tuple(words))} if words else set()
    return set(map(hash, zip(*(words[i:] for i in range(n)), strict=False)))


def common_cap(n_suite: int) -> int:
    """The most suite rows an n-gram may occur in and still count as content."""
    return max(COMMON_ROWS, int(COMMON_SHARE * n_suite))


def _suite_postings(item_grams: set[int], suite: Sequence[str], n: int, cap: int) -> dict[int, list[int]]:
    """n-gram → the suite rows holding it, for the items' n-grams only; a list stops at cap + 1 rows (template)."""
    postings: dict[int, list[int]] = {}
    for row, text in enumerate(suite):
        for g in ngrams(text, n) & item_grams:
            rows = postings.setdefault(g, [])
            if len(rows) <= cap:
                rows.append(row)
    return postings


def _best(counts: Counter[int], size: int) -> tuple[int, float] | None:
    """The text sharing most of an item's `size` content n-grams (the lowest index on ties)."""
    if not counts:
        return None
    index, shared = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return index, shared / size


def near_copies(
    items: Sequence[str], suite: Sequence[str], threshold: float = THRESHOLD, n: int = N
) -> list[NearCopy | None]:
    """For each item, the text it is a near copy of (module docstring), or None. A suite row wins over an
    earlier item at equal overlap; of two near-copy items the first is kept (None) and the later one names it."""
    grams = [ngrams(t, n) for t in items]
    in_items = Counter(g for item in grams for g in item)
    cap = common_cap(len(suite))
    postings = _suite_postings(set(in_items), suite, n, cap)
    # the template: the suite's, and the generator's own (an n-gram in more items than the cap)
    template = {g for g, r in postings.items() if len(r) > cap} | {g for g, k in in_items.items() if k > cap}
    seen: dict[int, list[int]] = {}  # n-gram → the items before this one that hold it
    out: list[NearCopy | None] = []
    for i, item in enumerate(grams):
        content = item - template
        found: NearCopy | None = None
        if content:
            in_suite = _best(Counter(r for g in content for r in postings.get(g, ())), len(content))
            earlier = _best(Counter(j for g in content for j in seen.get(g, ())), len(content))
            if in_suite and in_suite[1] >= threshold and (not earlier or in_suite[1] >= earlier[1]):
                found = NearCopy("suite", *in_suite)
            elif earlier and earlier[1] >= threshold:
                found = NearCopy("item", *earlier)
        for g in content:
            seen.setdefault(g, []).append(i)
        out.append(found)
    return out
