"""Near-copy detection of probe items (`cg_ray.probe.dedupe.near_copies`) vs the naive way, in one run.

Workload (synthetic, seeded): ROWS suite rows and ITEMS items of WORDS words drawn from a 20,000-word
vocabulary; every tenth item is a suite row with two words changed (a near copy to find). Ours indexes the
items' n-grams and streams the suite past them once. The naive way compares every item with every suite row
and every earlier item (set intersections of the same hashed n-grams, the same rule). Both must name the same
texts; the naive way runs on a prefix (`--naive-rows` × `--naive-items`) and ours is timed on that same
prefix for the ratio, printed last. The full-size time is what a probe pays per run.

    .venv/bin/python benchmarks/bench_probe_dedupe.py [--rows 100000] [--items 2000] [--naive-rows 5000]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np

from cg_ray.probe.dedupe import THRESHOLD, NearCopy, common_cap, near_copies, ngrams

VOCABULARY = 20_000


def corpus(rng: np.random.Generator, rows: int, words: int = 40) -> list[str]:
    """Texts of `words` words drawn uniformly from the vocabulary: unrelated texts share almost no 5-gram."""
    vocab = np.array([f"w{i}" for i in range(VOCABULARY)])
    return [" ".join(r) for r in vocab[rng.integers(0, VOCABULARY, (rows, words))]]


def plant_copies(rng: np.random.Generator, suite: Sequence[str], n_items: int) -> tuple[list[str], dict[int, int]]:
    """Fresh items, every tenth a distinct suite row with two words changed: item index → the row it copies."""
    items = corpus(rng, n_items, len(suite[0].split()))
    rows = rng.choice(len(suite), len(range(0, n_items, 10)), replace=False)  # two copies of one row would copy
    planted = {}  # each other
    for i, row in zip(range(0, n_items, 10), rows.tolist(), strict=True):
        words = suite[row].split()
        words[len(words) // 8], words[-len(words) // 4] = "changed", "words"
        items[i], planted[i] = " ".join(words), row
    return items, planted


def all_pairs(items: Sequence[str], suite: Sequence[str], threshold: float = THRESHOLD) -> list[NearCopy | None]:
    """The naive way: every item against every suite row and every earlier item, with the rule of
    `near_copies` (template n-grams, found in more than the cap of suite rows or of items, left out)."""
    item_grams, suite_grams = [ngrams(t) for t in items], [ngrams(t) for t in suite]
    cap = common_cap(len(suite))
    counts = (Counter(g for s in suite_grams for g in s), Counter(g for s in item_grams for g in s))
    template = {g for c in counts for g, k in c.items() if k > cap}
    out: list[NearCopy | None] = []
    for i, whole in enumerate(item_grams):
        content, best = whole - template, None
        sources: tuple[tuple[Literal["suite", "item"], list[set[int]]], ...] = (
            ("suite", suite_grams),
            ("item", item_grams[:i]),
        )  # the suite first: it wins a tie
        for source, texts in sources:
            for j, other in enumerate(texts):
                share = len(content & other) / len(content) if content else 0.0
                if share >= threshold and (best is None or share > best.overlap):
                    best = NearCopy(source, j, share)
        out.append(best)
    return out


def main() -> None:
    from cg_ray.hardware import hardware_info

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--items", type=int, default=2_000)
    ap.add_argument("--words", type=int, default=40)
    ap.add_argument("--naive-rows", type=int, default=5_000)
    ap.add_argument("--naive-items", type=int, default=200)
    args = ap.parse_args()
    print(f"hardware: {hardware_info().line()}; pure Python sets of hashed 5-grams (no model)")
    rng = np.random.default_rng(0)
    suite = corpus(rng, args.rows, args.words)
    items, planted = plant_copies(rng, suite, args.items)
    t0 = time.perf_counter()
    found = near_copies(items, suite)
    full_s = time.perf_counter() - t0
    hits = {i: c.index for i, c in enumerate(found) if c is not None and c.source == "suite"}
    print(
        f"ours, {args.rows:,} rows × {args.items:,} items of {args.words} words: {full_s:.2f} s, "
        f"{len(hits)} near copies found of {len(planted)} planted, all right: {hits == planted}"
    )

    small_suite = corpus(np.random.default_rng(1), args.naive_rows, args.words)
    small_items, _ = plant_copies(np.random.default_rng(2), small_suite, args.naive_items)
    t0 = time.perf_counter()
    mine = near_copies(small_items, small_suite)
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = all_pairs(small_items, small_suite)
    naive_s = time.perf_counter() - t0
    agree = mine == theirs
    scale = args.rows * args.items / (args.naive_rows * args.naive_items)  # the naive cost is linear in pairs
    print(
        f"naive all pairs on {args.naive_rows:,} rows × {args.naive_items:,} items: {naive_s:.2f} s "
        f"(≈ {naive_s * scale:,.0f} s at full size); ours {ours_s:.3f} s; same near copies: {agree}"
    )
    if not agree or hits != planted:
        raise SystemExit("the indexed near copies differ from the naive ones or from the planted ones")
    size = f"{args.naive_rows:,} × {args.naive_items:,}"
    print(f"speed-up (indexed / naive all pairs, same {size}): {naive_s / ours_s:.1f}x")


if __name__ == "__main__":
    main()
