"""Failure modes judged held out: each fold builds its modes from its own training rows — groups its pool of
concepts by co-activation, ranks the groups, merges those with the same rows or the same strong words — and
tests its first top-k on its held-out rows; modes of different folds that share a concept and most of their
rows are one finding, judged over the folds (`heldout.combine`). docs/failure_modes.md.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from cg_ray.config import MetricsConfig
from cg_ray.profile.classterms import ClassTerms
from cg_ray.profile.crossfit import FoldPlan, PoolRows, Tests, fold_judgements
from cg_ray.profile.grouping import group_near_duplicates, jaccard_from_counts
from cg_ray.profile.heldout import FoldTest, Verdict, combine
from cg_ray.profile.modes import TERMS_COMPARED, ModeClass, merge_by_terms, merge_contained, training_rank
from cg_ray.profile.strata import RowFrame
from cg_ray.profile.terms import Terms, content_words

FloatArray = npt.NDArray[np.float64]

CANDIDATE_FACTOR = 2  # modes a fold describes (and may merge by their terms), per mode it tests
STRONG_SHARE = 0.5  # a term merges modes only when at least this share of both modes' rows hold it
MAX_ROW_SHARE = 0.5  # a candidate mode holds at most this share of the rows
SAME_ROWS = 0.5  # fold modes of different folds with this row Jaccard (and a shared concept) are one finding


def fold_modes(
    plan: FoldPlan,
    frame: RowFrame,
    expected: FloatArray,
    heads: list[list[int]],
    pool: PoolRows,
    book: ClassTerms,
    cfg: MetricsConfig,
) -> list[tuple[ModeClass, Verdict]]:
    """Each fold builds its failure modes from its own training part — group its concepts, rank the groups,
    merge those with the same rows or words — and tests the first top_k on its held-out rows; modes of
    different folds sharing a concept and most of their rows are one finding (`_identities`), judged over the
    folds (`heldout.combine`)."""
    everyone = sorted({c for h in heads for c in h})
    if not everyone:
        return []
    sim = jaccard_from_counts(pool.intersections(everyone))
    slot = {c: i for i, c in enumerate(everyone)}
    ranked: list[list[ModeClass]] = []
    for k, head in enumerate(heads):
        idx = np.array([slot[c] for c in head], dtype=np.int64)
        rep = group_near_duplicates(sim[np.ix_(idx, idx)], -np.arange(len(head), dtype=np.float64), cfg.mode_jaccard)
        groups: dict[int, list[int]] = {}
        for s, r in enumerate(rep):
            groups.setdefault(int(r), []).append(head[s])
        classes = [ModeClass(tuple(g), pool.members(g)[0]) for _, g in sorted(groups.items())]
        # A group on most of the suite is the suite, not a mode of it (its residual is ≈ 0 by construction,
        # and its tight interval would rank it first among the noise).
        classes = [c for c in classes if c.rows.size <= MAX_ROW_SHARE * frame.n_rows]
        train = (plan.fold != k) & frame.scored
        ranked.append(
            merge_contained(training_rank(classes, train, frame.scores, expected))[: CANDIDATE_FACTOR * cfg.top_k]
        )
    terms = book.compute({c.members: pool.members(c.members) for fold in ranked for c in fold})
    tests: Tests = {}
    fold_classes: dict[tuple[int, int], ModeClass] = {}
    for k, classes in enumerate(ranked):
        merged = merge_by_terms(classes, lambda m: _strong_words(terms.get(m)))
        merged = [m for m in merged if m.rows.size <= MAX_ROW_SHARE * frame.n_rows]
        for j, c in enumerate(merged[: cfg.top_k]):
            tests[(k, j)] = {k: (plan.by_cell[k].contrast(c.rows, confidence=plan.fold_confidence), j + 1)}
            fold_classes[(k, j)] = c
    judged = fold_judgements(tests, plan.folds)
    return [
        (_representative([fold_classes[key] for key in ident]), _combined(ident, judged, plan))
        for ident in _identities(fold_classes)
    ]


def _strong_words(terms: Terms | None) -> set[str]:
    """The content words of a class's first terms that most of its rows hold: a term in a fifth of a broad
    concept's rows (a random concept that happens to touch the figure rows) merges nothing."""
    if terms is None:
        return set()
    strong = [t for t, share in zip(terms.terms[:TERMS_COMPARED], terms.share, strict=False) if share >= STRONG_SHARE]
    return content_words(strong)


def _identities(fold_classes: dict[tuple[int, int], ModeClass]) -> list[list[tuple[int, int]]]:
    """Fold modes that are the same finding, linked across folds (union-find): they share a concept and most
    of their rows (Jaccard ≥ SAME_ROWS), so the rows a finding is measured on in each fold are the rows it
    shows. A concept merged into a broad mode in one fold does not drag that mode into another's figures."""
    keys = list(fold_classes)
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    holders: dict[int, list[int]] = {}
    for i, key in enumerate(keys):
        for c in fold_classes[key].members:
            holders.setdefault(c, []).append(i)
    for held in holders.values():
        for x, i in enumerate(held):
            for j in held[x + 1 :]:
                if keys[i][0] == keys[j][0] or root(i) == root(j):
                    continue
                a, b = fold_classes[keys[i]].rows, fold_classes[keys[j]].rows
                inter = np.intersect1d(a, b, assume_unique=True).size
                if inter >= SAME_ROWS * (a.size + b.size - inter):
                    parent[root(i)] = root(j)
    out: dict[int, list[tuple[int, int]]] = {}
    for i, key in enumerate(keys):
        out.setdefault(root(i), []).append(key)
    return list(out.values())


def _combined(
    ident: list[tuple[int, int]], judged: dict[object, dict[int, tuple[FoldTest, float]]], plan: FoldPlan
) -> Verdict:
    """One finding's verdict from its fold modes: per fold the best one, its p and q multiplied by how many
    that fold had in the finding (Bonferroni, so a fold with several tries gains nothing from them)."""
    per_fold: dict[int, tuple[FoldTest, float]] = {}
    for key in ident:
        k = key[0]
        t, q = judged[key][k]
        tries = sum(1 for other in ident if other[0] == k)
        t = replace(t, p_value=min(1.0, t.p_value * tries))
        q = min(1.0, q * tries)
        if k not in per_fold or q < per_fold[k][1]:
            per_fold[k] = (t, q)
    return combine(per_fold, plan.folds, plan.fdr)


def _representative(classes: list[ModeClass]) -> ModeClass:
    """The member set the folds chose most often (ties: more rows), shown for the finding."""
    counts = Counter(c.members for c in classes)
    return max(classes, key=lambda c: (counts[c.members], c.rows.size))
