"""Near-copy detection of probe items against the suite and each other."""

from __future__ import annotations

import time

import numpy as np

from benchmarks.bench_probe_dedupe import all_pairs, corpus, plant_copies
from cg_ray.probe.dedupe import COMMON_ROWS, THRESHOLD, N, NearCopy, near_copies, ngrams, tokens

ROW = (
    "Tom has 3 apples and buys 5 more at the market on Sunday. He gives 2 of them to his sister Anna "
    "and eats one after lunch. How many apples does Tom have left at the end of the day?"
)
OTHER = "Write a function that returns the sum of the squares of the even numbers in a list of integers."


def test_exact_copy_and_copy_with_changed_numbers_and_names() -> None:
    edited = ROW.replace("3", "12").replace("Tom", "Lena").replace("Anna", "Paul")
    out = near_copies([ROW, edited, OTHER.upper()], [OTHER, ROW])
    assert out[0] == NearCopy("suite", 1, 1.0)
    assert out[1] is not None and out[1].source == "suite" and out[1].index == 1
    assert THRESHOLD <= out[1].overlap < 1.0
    assert out[2] == NearCopy("suite", 0, 1.0)  # case and punctuation do not matter


def test_paraphrase_and_a_different_item_on_the_same_task_are_not_copies() -> None:
    paraphrase = (
        "On Sunday Tom went to the market with three apples in his bag and bought five others. Later he "
        "handed two to Anna, his sister, and ate one once lunch was over. What number of apples remain?"
    )
    same_task = (
        "Maria bakes 24 cookies for a school fair. She packs them in bags of 4 and sells each bag for 2 "
        "dollars. If she sells all but one bag, how much money does Maria make at the fair?"
    )
    assert near_copies([paraphrase, same_task], [ROW, OTHER]) == [None, None]


def test_within_items_the_first_is_kept_and_the_later_named() -> None:
    edited = ROW.replace("Sunday", "Monday")
    out = near_copies([OTHER, ROW, edited, ROW], ["an unrelated suite row about the weather in spring"])
    assert out[0] is None and out[1] is None
    assert out[2] is not None and out[2].source == "item" and out[2].index == 1
    assert out[3] == NearCopy("item", 1, 1.0)


def test_short_texts_are_copies_only_when_equal_after_normalisation() -> None:
    assert tokens("What is 7 times 8?") == ["what", "is", "0", "times", "0"]
    assert len(ngrams("What is 7 × 8?")) == 1  # under N words: one whole-sequence gram
    out = near_copies(["What is 7 × 8?", "What is 6 × 9?", "What is 7 plus 8?", "Name a colour."], ["what is 2×3"])
    assert out[0] == NearCopy("suite", 0, 1.0) and out[1] == NearCopy("suite", 0, 1.0)
    assert out[2] is None and out[3] is None
    # a short item inside a longer row is not a copy of it: too little text to tell
    assert near_copies(["the market on"], [ROW]) == [None]


def test_empty_input() -> None:
    assert near_copies([], [ROW]) == []
    assert near_copies([ROW, ""], []) == [None, None]
    assert near_copies(["", "", "!!"], [""]) == [None, None, None]


def test_template_ngrams_count_neither_way() -> None:
    template = (
        "Read the question below carefully. Think about it step by step, then answer with a single number "
        "and nothing else: no units, no words and no working."
    )  # 25 words: 21 of the 33 n-grams of a row
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(3000)]
    suite = [f"{template} {' '.join(rng.choice(vocab, 12))}" for _ in range(COMMON_ROWS + 50)]
    bare = " ".join(rng.choice(vocab, 12))
    suite.append(bare)  # one row without the template
    fresh = f"{template} {' '.join(rng.choice(vocab, 12))}"  # shares its template with every row: not a copy
    dressed = f"{template} {bare}"  # the bare row's content in the template: a copy (8 of its 12 content grams)
    out = near_copies([fresh, dressed], suite)
    assert out[0] is None
    assert out[1] is not None and out[1].index == len(suite) - 1 and out[1].overlap == 8 / 12


def test_agrees_with_all_pairs_on_random_texts() -> None:
    rng = np.random.default_rng(1)
    suite = corpus(rng, 300)
    items, _ = plant_copies(rng, suite, 60)
    items[3] = items[0]  # a copy of an item that copies the suite: the closer text (the item) is named
    items[4] = items[1]
    out = near_copies(items, suite)
    assert out == all_pairs(items, suite)
    assert out[0] is not None and out[0].source == "suite" and out[0].overlap < 1
    assert out[3] == NearCopy("item", 0, 1.0) and out[4] == NearCopy("item", 1, 1.0)


def test_speed_20k_rows_by_2k_items() -> None:
    rng = np.random.default_rng(2)
    suite = corpus(rng, 20_000)
    items, planted = plant_copies(rng, suite, 2_000)
    start = time.process_time()
    out = near_copies(items, suite)
    took = time.process_time() - start
    print(f"near_copies: 20,000 rows × 2,000 items, {N}-grams: {took:.2f} s CPU")
    found = {i: c.index for i, c in enumerate(out) if c is not None and c.source == "suite"}
    assert sum(c is not None for c in out) == len(found)
    assert found == planted
    assert took < 60  # generous: about 1 s on one core; all pairs would be 40M set intersections
