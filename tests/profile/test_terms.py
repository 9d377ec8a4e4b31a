"""Distinctive terms (issue #31): no stop words or punctuation, unweighted shares, a background per class."""

from __future__ import annotations

import re

import numpy as np

from cg_ray.profile.terms import (
    SAME_CELLS,
    SUITE,
    Terms,
    admissible,
    content_words,
    distinctive_terms,
    term_pattern,
    terms_present,
)


def _rows(idx: range | list[int], weights: list[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(list(idx), dtype=np.int64)
    return r, np.asarray(weights if weights is not None else [1.0] * r.size, dtype=np.float64)


def test_admissible_drops_stop_words_and_punctuation_only() -> None:
    for term in ("is the", "how many", "the", "does", "--", "==", "$$", "-- --", "the --", "__"):
        assert not admissible(term), term
    for term in ("is kayak", "-- draw", "[asy]", "\\frac", "kayak", "12", "yes or"):
        assert admissible(term), term


def test_top_terms_are_never_stop_words_nor_punctuation() -> None:
    # Every class row is full of stop words and "--"; only "kayak" (and its 2-grams) sets the class apart.
    cls = [f"Is the -- -- how many -- is it the one -- kayak {i}?" for i in range(10)]
    bg = [f"Draw the line number {i} and label it." for i in range(30)]
    texts = cls + bg
    (terms,) = distinctive_terms(texts, [_rows(range(10))], np.arange(10, 40), max_terms=4)
    assert terms.terms, terms
    assert "kayak" in " ".join(terms.terms)
    for t in terms.terms:
        assert admissible(t), t
        assert any(w not in {"is", "the", "how", "many", "it", "one", "--"} for w in t.split()), t
    assert terms.versus == SUITE and terms.sentence() is not None
    assert terms.sentence().endswith(f"of {SUITE})")  # type: ignore[union-attr]


def test_shares_are_unweighted_row_shares() -> None:
    # One heavily weighted row has "zebra"; nine light rows do not: 1 row in 10, so not reported at 0.2.
    cls = ["zebra stripes here"] + [f"plain kayak row {i}" for i in range(9)]
    bg = [f"other text {i} zebra" if i == 0 else f"other text {i}" for i in range(40)]
    texts = cls + bg
    weights = [100.0] + [0.01] * 9
    (terms,) = distinctive_terms(texts, [_rows(range(10), weights)], np.arange(10, 50), min_share=0.2)
    assert "zebra" not in terms.terms
    assert "kayak" in terms.terms
    assert terms.share[terms.terms.index("kayak")] == 0.9  # 9 of 10 rows, whatever their weights
    (low,) = distinctive_terms(texts, [_rows(range(10), weights)], np.arange(10, 50), min_share=0.05, max_terms=10)
    assert low.share[low.terms.index("zebra")] == 0.1


def test_per_class_background_contrasts_with_the_same_cells() -> None:
    # Class A: geometry rows with "[asy]" and "kayak"; its cells' other rows also hold "[asy]" (common
    # there, rare in the rest of the suite), so only "kayak" is distinctive for A.
    a = [f"[asy] draw kayak shape {i}" for i in range(10)]
    same_cells = [f"[asy] draw circle {i}" for i in range(10)]
    rest = [f"spell the word {i}" for i in range(40)]
    texts = a + same_cells + rest
    cls = _rows(range(10))
    own = _rows(range(10, 20))
    (shared,) = distinctive_terms(texts, [cls], np.arange(10, 60))  # against the whole suite
    assert "[asy]" in " ".join(shared.terms)
    (terms,) = distinctive_terms(texts, [cls], [own])
    assert not any("[asy]" in t or t == "draw" for t in terms.terms), terms
    assert "kayak" in content_words(terms.terms)
    assert terms.background[0] == 0.0
    assert terms.versus == SAME_CELLS
    sentence = terms.sentence()
    assert sentence is not None and "of rows of the same cells where it is off" in sentence


def test_background_weights_set_the_background_share() -> None:
    cls = [f"kayak {i}" for i in range(10)]  # single digits are no token
    bg = ["kayak seen", "nothing here", "nothing there", "nothing else"]
    texts = cls + bg
    (terms,) = distinctive_terms(texts, [_rows(range(10))], [_rows([10, 11, 12, 13], [3.0, 1.0, 1.0, 1.0])])
    # "kayak" in the background: 3 of 6 weight -> 50%, and 100% / 50% passes the 1.5 ratio.
    assert terms.terms == ["kayak"] and terms.share == [1.0] and terms.background == [0.5]
    (none,) = distinctive_terms(texts, [_rows(range(10))], [_rows([10, 11], [9.0, 1.0])])
    assert "kayak" not in none.terms  # 90% of the weighted background: not distinctive


def test_empty_background_or_class_gives_no_terms() -> None:
    texts = [f"kayak {i}" for i in range(6)]
    got = distinctive_terms(texts, [_rows(range(3)), _rows([])], [_rows([]), _rows([3, 4])])
    assert got == [Terms([], [], [], SAME_CELLS), Terms([], [], [], SAME_CELLS)]
    assert distinctive_terms(texts, [], np.arange(3)) == []


def test_content_words() -> None:
    assert content_words(["is kayak", "-- draw", "how many", "[asy]", "12 apples", "The Label"]) == {
        "kayak",
        "draw",
        "[asy]",
        "apples",
        "label",
    }
    assert content_words([]) == set()


def test_terms_present_and_pattern_still_agree() -> None:
    text = 'Is "kayak" a palindrome? [asy] draw'
    assert terms_present(text, ["is kayak", "[asy]", "draw"]) == 3
    pattern = term_pattern(["is kayak", "an"])
    assert pattern is not None and pattern.search(text) and not re.search(pattern, "answer")


def test_a_currency_sign_before_an_amount_is_a_term_and_is_marked_there_only() -> None:
    """Money in word problems ("$12") is a property a failure can have; "$x$" (LaTeX) is not money."""
    import re

    from cg_ray.profile.terms import TOKEN_PATTERN, admissible, term_pattern

    assert re.findall(TOKEN_PATTERN, "she paid $12.50 and $x$") == ["she", "paid", "$", "12", "50", "and"]
    assert admissible("$") and not admissible("--")
    pattern = term_pattern(["$"])
    assert pattern is not None and pattern.findall("pay $5 for $x$") == ["$"]
