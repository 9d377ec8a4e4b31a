"""The labeller's statistics on planted data: context words, n-grams, sites, the label phrase."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from cg_ray.describe.render import label_tokens
from cg_ray.sae_training.sae_label import (
    LabelSettings,
    corpus_frequencies,
    enriched_context_words,
    label_phrase,
    top_ngram,
    trigrams,
    word_tokens,
)

VOCAB = 50


def test_context_words_find_a_planted_topic_and_skip_common_words() -> None:
    rng = np.random.default_rng(0)
    frequency = np.full(VOCAB, 0.01)
    frequency[7] = 0.0005  # rare in the corpus, yet around most sites: the topic
    frequency[3] = 0.5  # very common: around every site by chance
    frequency /= frequency.sum()
    contexts = []
    for i in range(40):
        ctx = rng.integers(10, VOCAB, size=20)
        ctx[0] = 3
        if i % 4:  # 30 of 40 sites
            ctx[5] = 7
        contexts.append(ctx)
    words = np.ones(VOCAB, dtype=bool)
    found = enriched_context_words(contexts, frequency, words, LabelSettings())
    assert [t for t, *_ in found] == [7]
    _, k, lift, p = found[0]
    chance = 1 - (1 - frequency[7]) ** 20
    assert k == 30 and lift == pytest.approx((30 / 40) / chance)
    assert p == pytest.approx(binom.sf(29, 40, chance))
    words[7] = False  # not a word (e.g. punctuation): never named
    assert enriched_context_words(contexts, frequency, words, LabelSettings()) == []


def test_context_words_need_support_across_sites() -> None:
    frequency = np.full(VOCAB, 1 / VOCAB)
    frequency[7] = 1e-6
    contexts = [np.array([7, 11, 12])] * 2 + [np.array([11, 12, 13])] * 38  # rare word, but at 2 sites only
    found = [t for t, *_ in enriched_context_words(contexts, frequency, np.ones(VOCAB, bool), LabelSettings())]
    assert 7 not in found and 11 in found  # 11 is around every site: that one is named


def test_trigrams_match_a_direct_lookup() -> None:
    windows = [[0, 5, 6, 7, 8], [0, 9, 10], [0, 11]]
    window = np.array([0, 0, 0, 1, 1, 2])
    position = np.array([1, 2, 4, 1, 2, 1])
    got = trigrams(windows, window, position)
    for row, (w, p) in enumerate(zip(window, position, strict=True)):
        expect = [windows[w][p - b] if p - b >= 1 else -1 for b in (2, 1)] + [windows[w][p]]
        assert got[row].tolist() == expect


def test_top_ngram_weighs_by_activation_mass() -> None:
    grams = np.array([[1, 2], [3, 4], [1, 2], [3, 4], [3, 4]])
    weights = np.array([5.0, 1.0, 5.0, 1.0, 1.0])
    site, share = top_ngram(grams, weights)
    assert grams[site].tolist() == [1, 2] and share == pytest.approx(10 / 13)


def test_corpus_frequencies_skip_the_bos() -> None:
    freq = corpus_frequencies([[0, 1, 1], [0, 2]], 4)
    assert freq.tolist() == [0.0, pytest.approx(2 / 3), pytest.approx(1 / 3), 0.0]


def test_label_phrase_names_the_context_or_stays_a_parseable_token_list() -> None:
    assert label_phrase(["\n", "```"], "```\n", 0.3, ["python", "import"]) == (
        "line breaks, “```” in text about python, import"
    )
    plain = label_phrase([",", "."], ",", 0.2, [])
    assert plain == "',' | '.'" and label_tokens(plain) == [",", "."]
    assert label_phrase([" house"], " old house", 0.7, ["story"]) == "“old house” in text about story"


class _Chars:
    """A tokenizer stand-in whose token i decodes to VOCAB_WORDS[i]."""

    def decode(self, ids: list[int]) -> str:
        return "".join(VOCAB_WORDS[i] for i in ids)


VOCAB_WORDS = [" the", " you", " ,", " python", " it", " import", "heet"]


def test_word_tokens_skip_punctuation_short_tokens_pieces_and_the_most_frequent_words() -> None:
    frequency = np.array([0.4, 0.3, 0.2, 0.05, 0.03, 0.02, 0.01])
    words = word_tokens(_Chars(), frequency, common=1)
    # " the" is the most frequent word; " ," is not a word; " it" is too short; "heet" is a word's tail
    assert words.tolist() == [False, True, False, True, False, True, False]
    assert word_tokens(_Chars(), frequency, common=0).tolist() == [True, True, False, True, False, True, False]


def test_word_starts_follow_the_tokenizers_space_marker() -> None:
    from transformers import AutoTokenizer

    from cg_ray.catalog import resolve_model

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(resolve_model("smollm2-135m-instruct")))
    except Exception as exc:  # the model is prepared by `make setup`
        pytest.skip(f"reader model not prepared: {exc}")
    sheet = tokenizer(" sheet metal", add_special_tokens=False)["input_ids"]
    pieces = tokenizer(" antidisestablishment", add_special_tokens=False)["input_ids"]  # Ġant idis establish ment
    words = word_tokens(tokenizer, np.ones(len(tokenizer)), common=0)
    assert words[sheet[0]]  # " sheet" starts a word
    assert len(pieces) > 1 and not any(words[i] for i in pieces[1:])  # the tail pieces do not
