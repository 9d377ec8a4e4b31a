"""Distinctive terms: the words and symbols the rows of a class (a failure mode, a concept) share and the rest
of the suite does not, as a sentence ("Rows with “[asy]”, “draw”, “label”: …").

Class-based TF-IDF as in BERTopic's c-TF-IDF (Grootendorst 2022): the rows of each class are one document,
the rest of the suite (a seeded background sample) one more; a term's weight in class k is its frequency
there, normalised by the class's total, times log(1 + A / f_t), with A the mean total per class and f_t the
term's frequency over all classes. Frequencies count rows that contain the term (binary), each weighted by
the class's activation on it (s̃ summed over the class's concepts), so the most typical rows weigh most.
A term is reported only when it is also *distinctive*: present in ≥ `min_share` of the class's weight and
≥ `min_ratio` times as common there as in the background. scikit-learn's CountVectorizer tokenises: words,
bracket tags (`[asy]`), LaTeX commands (`\\frac`) and runs of two or more operator symbols, as 1- and 2-grams.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

# Bracket tags, LaTeX commands, words of 2+ characters, and runs of 2+ operator symbols (`--`, `==`, `$$`);
# quotes, brackets and punctuation alone are no term ("((" or "\",").
TOKEN_PATTERN = r"\[/?\w+\]|\\[A-Za-z]+|\b\w[\w'-]*\w\b|[^\w\s\"'()\[\]{},;:.?!]{2,}"
MAX_TERMS = 4
MIN_SHARE = 0.2
MIN_RATIO = 1.5


@dataclass(frozen=True)
class Terms:
    terms: list[str]
    share: list[float]  # weighted share of the class's rows containing each term
    background: list[float]  # share of the background rows containing it

    def sentence(self) -> str | None:
        if not self.terms:
            return None
        quoted = ", ".join(f"“{t}”" for t in self.terms)
        return f"Rows with {quoted} (the first in {self.share[0]:.0%} of them vs {self.background[0]:.0%} of the suite)"


def distinctive_terms(
    texts: Sequence[str],
    classes: Sequence[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]],
    background: npt.NDArray[np.int64],
    max_terms: int = MAX_TERMS,
    min_share: float = MIN_SHARE,
    min_ratio: float = MIN_RATIO,
) -> list[Terms]:
    """For each class (indices into `texts`, weights), its distinctive terms against the `background` rows."""
    from sklearn.feature_extraction.text import CountVectorizer

    empty = [Terms([], [], []) for _ in classes]
    if not classes or background.size == 0:
        return empty
    vectorizer = CountVectorizer(
        token_pattern=TOKEN_PATTERN, ngram_range=(1, 2), lowercase=True, binary=True, min_df=2, max_features=50_000
    )
    try:
        x = vectorizer.fit_transform(texts).tocsr()
    except ValueError:  # no term occurs twice: nothing is distinctive
        return empty
    vocab = np.asarray(vectorizer.get_feature_names_out(), dtype=object)
    bg = np.asarray(x[background].mean(axis=0)).ravel()
    raw = []
    shares = []
    for rows, weights in classes:
        w = np.asarray(weights, dtype=np.float64)
        tf = np.asarray(x[rows].T @ w).ravel() if rows.size else np.zeros(vocab.size)
        raw.append(tf)
        shares.append(tf / w.sum() if rows.size and w.sum() > 0 else tf)
    # c-TF-IDF over the classes and the background, each class's frequencies on the same row-count scale.
    counts = np.vstack([s * max(len(c[0]), 1) for s, c in zip(shares, classes, strict=True)] + [bg * background.size])
    totals = counts.sum(axis=1)
    avg = float(totals.mean()) if totals.size else 0.0
    f_t = counts.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        idf = np.log1p(np.where(f_t > 0, avg / f_t, 0.0))
    out = []
    for k, share in enumerate(shares):
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
            Terms([str(vocab[t]) for t in chosen], [float(share[t]) for t in chosen], [float(bg[t]) for t in chosen])
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
        body = r"\W+".join(re.escape(part) for part in term.split())
        head = r"(?<!\w)" if re.match(r"\w", term) else ""
        tail = r"(?!\w)" if re.search(r"\w$", term) else ""
        return head + body + tail

    return re.compile("|".join(one(t) for t in words), re.I)
