"""Distinctive terms: the words and symbols the rows of a class (a failure mode, a concept) share and the rows
it is contrasted with do not, as a sentence ("Rows with “[asy]”, “draw”, “label”: …").

Class-based TF-IDF as in BERTopic's c-TF-IDF (Grootendorst 2022) ranks the terms: the rows of each class are
one document, the background rows one more; a term's weight in class k is its frequency there, normalised by
the class's total, times log(1 + A / f_t), with A the mean total per document and f_t the term's frequency
over all of them. Frequencies count rows that contain the term (binary), each weighted by the class's
activation on it (s̃ summed over the class's concepts), so the most typical rows rank first.

A term is reported only when it is also *distinctive*, by unweighted row shares (each row counts once, so
the reported figures say how many rows hold it): present in ≥ `min_share` of the class's rows and ≥
`min_ratio` times as common there as in the class's background: the rows of the same metadata cells where
the class is off, weighted to the class's cell mix (or, given one array, a plain sample of the suite).
Stop words, n-grams of stop words only and punctuation-only n-grams (`--`, `-- --`) are no terms.
scikit-learn's CountVectorizer tokenises: words, bracket tags (`[asy]`), LaTeX commands (`\\frac`) and
runs of two or more operator symbols, as 1- and 2-grams.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt

# A currency sign before an amount ("$12": money, whatever the amount), bracket tags, LaTeX commands, words of 2+
# characters, and runs of 2+ operator symbols (`--`, `==`, `$$`); quotes, brackets and punctuation alone are no
# term ("((" or "\",").
CURRENCY = "$€£¥"
TOKEN_PATTERN = rf"[{re.escape(CURRENCY)}](?=\d)|\[/?\w+\]|\\[A-Za-z]+|\b\w[\w'-]*\w\b|[^\w\s\"'()\[\]{{}},;:.?!]{{2,}}"
MAX_TERMS = 4
MIN_SHARE = 0.2
MIN_RATIO = 1.5
MAX_FEATURES = 50_000  # most frequent admissible terms kept (bounds the per-class arrays)
# Function words scikit-learn's list lacks: auxiliaries and contractions (whole, and the pieces a curly
# apostrophe leaves: "don’t" -> "don"; not "won", a word).
# fmt: off
_EXTRA_STOP_WORDS = frozenset([
    "does", "did", "doing", "shall", "let", "let's", "it's", "i'm", "i'd", "i'll", "i've", "you're", "you've",
    "you'll", "you'd", "we're", "we've", "we'll", "they're", "they've", "they'll", "that's", "there's", "here's",
    "what's", "who's", "where's", "how's", "isn't", "aren't", "wasn't", "weren't", "don't", "doesn't", "didn't",
    "can't", "won't", "wouldn't", "shouldn't", "couldn't", "haven't", "hasn't", "hadn't", "mustn't", "isn", "aren",
    "wasn", "weren", "don", "doesn", "didn", "wouldn", "shouldn", "couldn", "haven", "hasn", "hadn", "mustn", "ll",
    "ve",
]) | frozenset("abcdefghijklmnopqrstuvwxyz")
# fmt: on


@cache
def stop_words() -> frozenset[str]:
    """scikit-learn's English stop words and ours (imported on first use: scikit-learn takes seconds)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | _EXTRA_STOP_WORDS


SUITE = "a sample of the suite"
SAME_CELLS = "rows of the same cells where it is off"

Rows = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]  # indices into the texts, a weight per row


@dataclass(frozen=True)
class Terms:
    terms: list[str]
    share: list[float]  # fraction of the class's rows containing each term (each row counts once)
    background: list[float]  # weighted share of the class's background rows containing it
    versus: str = SAME_CELLS  # what the background rows are, for the sentence

    def sentence(self) -> str | None:
        if not self.terms:
            return None
        quoted = ", ".join(f"“{t}”" for t in self.terms)
        first = f"the first in {self.share[0]:.0%} of them vs {self.background[0]:.0%} of {self.versus}"
        return f"Rows with {quoted} ({first})"


def _is_content(token: str) -> bool:
    if token in CURRENCY:  # a currency sign names money
        return len(token) == 1
    return any(ch.isalnum() for ch in token) and token.lower() not in stop_words()


def admissible(term: str) -> bool:
    """A term names something: at least one of its tokens is neither a stop word nor punctuation only
    ("is kayak" and "-- draw" are terms; "is the", "how many", "--" and "the --" are not)."""
    return any(_is_content(t) for t in term.split())


def content_words(terms: Sequence[str]) -> set[str]:
    """The lowercase words of `terms` that are not stop words and contain a letter."""
    stop = stop_words()
    return {w for t in terms for w in t.lower().split() if w not in stop and any(ch.isalpha() for ch in w)}


def _presence(x: Any, rows: npt.NDArray[np.int64], weights: npt.NDArray[np.float64] | None) -> np.ndarray:
    """Per term, the (weighted) mean presence over `rows`; the plain mean when no weight is positive."""
    sub = x[rows]
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    if w is None or not np.isfinite(w).all() or w.sum() <= 0:
        mean: np.ndarray = np.asarray(sub.sum(axis=0)).ravel() / max(len(rows), 1)  # exact: 9 / 10 is 0.9
        return mean
    out: np.ndarray = np.asarray(sub.T @ w).ravel() / w.sum()
    return out


def distinctive_terms(
    texts: Sequence[str],
    classes: Sequence[Rows],
    backgrounds: Sequence[Rows] | npt.NDArray[np.int64],
    max_terms: int = MAX_TERMS,
    min_share: float = MIN_SHARE,
    min_ratio: float = MIN_RATIO,
) -> list[Terms]:
    """For each class (indices into `texts`, weights), its distinctive terms against its background
    (`backgrounds[k]`: indices into `texts`, weights), or against one shared unweighted background when
    `backgrounds` is an array of indices. A class with no row or no background row gets no term."""
    from sklearn.feature_extraction.text import CountVectorizer

    if isinstance(backgrounds, np.ndarray):
        shared = np.asarray(backgrounds, dtype=np.int64)
        bgs: list[Rows] = [(shared, np.ones(shared.size)) for _ in classes]
        versus = SUITE
    else:
        bgs = [(np.asarray(r, dtype=np.int64), np.asarray(w, dtype=np.float64)) for r, w in backgrounds]
        versus = SAME_CELLS
        if len(bgs) != len(classes):
            raise ValueError(f"{len(bgs)} backgrounds for {len(classes)} classes")
    empty = [Terms([], [], [], versus) for _ in classes]
    if not classes or all(b.size == 0 for b, _ in bgs):
        return empty
    vectorizer = CountVectorizer(token_pattern=TOKEN_PATTERN, ngram_range=(1, 2), lowercase=True, binary=True, min_df=2)
    try:
        x = vectorizer.fit_transform(texts).tocsc()
    except ValueError:  # no term occurs twice: nothing is distinctive
        return empty
    vocab = np.asarray(vectorizer.get_feature_names_out(), dtype=object)
    keep = np.flatnonzero([admissible(str(v)) for v in vocab])
    if keep.size > MAX_FEATURES:
        df = np.asarray(x[:, keep].sum(axis=0)).ravel()
        keep = np.sort(keep[np.argsort(-df, kind="stable")[:MAX_FEATURES]])
    if keep.size == 0:
        return empty
    x, vocab = x[:, keep].tocsr(), vocab[keep]
    # The IDF's background document is the union of the backgrounds, each row once: it weighs a term by how
    # common it is in the suite around the classes; each class's own contrast is the ratio test below.
    union = np.unique(np.concatenate([b for b, _ in bgs]))
    rows_of = [(np.asarray(r, dtype=np.int64), np.asarray(w, dtype=np.float64)) for r, w in classes]
    weighted = [_presence(x, r, w) if r.size else np.zeros(vocab.size) for r, w in rows_of]
    counts = np.vstack(
        [s * max(r.size, 1) for s, (r, _) in zip(weighted, rows_of, strict=True)]
        + [np.asarray(x[union].sum(axis=0)).ravel()]
    )
    totals = counts.sum(axis=1)
    avg = float(totals.mean())
    f_t = counts.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        idf = np.log1p(np.where(f_t > 0, avg / f_t, 0.0))
    out = []
    for k, ((rows, _), (bg_rows, bg_w)) in enumerate(zip(rows_of, bgs, strict=True)):
        if rows.size == 0 or bg_rows.size == 0:
            out.append(Terms([], [], [], versus))
            continue
        share = _presence(x, rows, None)  # unweighted: what the sentence reports
        bg = _presence(x, bg_rows, bg_w)
        with np.errstate(divide="ignore", invalid="ignore"):
            weight = np.where(totals[k] > 0, counts[k] / totals[k], 0.0) * idf
            ratio = np.where(bg > 0, share / bg, np.inf)
        ok = (share >= min_share) & (ratio >= min_ratio)
        chosen: list[int] = []
        for t in np.flatnonzero(ok)[np.argsort(-weight[ok], kind="stable")]:
            words = set(str(vocab[t]).split())
            if any(words <= set(str(vocab[c]).split()) or set(str(vocab[c]).split()) <= words for c in chosen):
                continue  # "draw" beside "draw label" says nothing new
            chosen.append(int(t))
            if len(chosen) == max_terms:
                break
        out.append(
            Terms(
                [str(vocab[t]) for t in chosen],
                [float(share[t]) for t in chosen],
                [float(bg[t]) for t in chosen],
                versus,
            )
        )
    return out


def terms_present(text: str, terms: Sequence[str]) -> int:
    """How many of `terms` occur in `text`, tokenised as `distinctive_terms` does (lowercased 1- and 2-grams),
    so "is kayak" is found in 'Is "kayak" a palindrome?'."""
    tokens = re.findall(TOKEN_PATTERN, text.lower())
    grams = set(tokens) | {f"{a} {b}" for a, b in pairwise(tokens)}
    return sum(t in grams for t in terms)


def term_pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    """A case-insensitive regex that finds the terms in raw text as the tokeniser reads them: whole words
    only ("an" is not found in "answer"), a 2-gram's words separated by any non-word characters ('Is "kayak"'
    holds "is kayak"); longest terms first. None when there is no term."""
    words = sorted((t for t in terms if t.strip()), key=len, reverse=True)
    if not words:
        return None

    def one(term: str) -> str:
        if len(term) == 1 and term in CURRENCY:  # as the tokeniser reads it: the sign before an amount
            return re.escape(term) + r"(?=\d)"
        body = r"\W+".join(re.escape(part) for part in term.split())
        head = r"(?<!\w)" if re.match(r"\w", term) else ""
        tail = r"(?!\w)" if re.search(r"\w$", term) else ""
        return head + body + tail

    return re.compile("|".join(one(t) for t in words), re.I)
