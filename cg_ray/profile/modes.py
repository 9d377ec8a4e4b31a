"""Failure modes: groups of concepts that fire on the same rows, and how one split builds and ranks them on
its choosing half (`split_modes.py` runs them per split; docs/failure_modes.md).

`split_modes` groups concepts greedily in rank order (`grouping.group_near_duplicates`), each joining the
first better-ranked group whose leading concept's active rows it overlaps with Jaccard ≥ `mode_jaccard` (0.3,
as the themes). A mode is a rule on rows, `ModeClass`: its concepts and every row where one of them fires.
`training_rank` ranks modes on the choosing rows by the upper end of the Wilson interval of their mean
score less their mean cell mean (the choosing half's own cell means). One effect, one mode: `merge_contained`
merges a mode whose rows lie mostly inside a better one's (≥ `CONTAINED` of the smaller), `merge_by_terms`
one whose distinctive terms share a content word with a better one's among their first `TERMS_COMPARED`
("-- draw" and "linewidth draw" are one failure: figures), members and rows united, so every figure is
recomputed for the merged mode. `sharpen` drops the members whose rows only they add do not carry the mode's
effect (a broad concept must not dilute the effect's own). `ModeWeights` gives each row's weight in given
modes (the mode explanations use it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from cg_ray.arrays import FloatArray, IntArray
from cg_ray.metrics.firing import fires
from cg_ray.metrics.uncertainty import wilson_interval

TERMS_COMPARED = 4  # distinctive terms whose content words are compared when merging modes
CONTAINED = 0.5  # share of the smaller mode's rows inside the other's that makes them one mode
ADDED_EFFECT = 2 / 3  # rows a merge adds must score at least this share of the better mode's residual below


class ModeWeights:
    """Each row's summed s̃ of the members of given classes of concepts where they fire (`metrics.firing.fires`
    at the thresholds failure_modes.parquet records, `firing`; 0: any activation), batch by batch: the rows of a
    mode and how strongly it holds there (the mode explanations)."""

    def __init__(self, classes: Sequence[Sequence[int]], d_sae: int, firing: Mapping[int, float] | None = None) -> None:
        pool = sorted({c for cl in classes for c in cl})
        self.slot_of = np.full(d_sae, -1, dtype=np.int64)
        self.slot_of[pool] = np.arange(len(pool))
        self.threshold = np.array([(firing or {}).get(c, 0.0) for c in pool], dtype=np.float64)
        pairs = np.array([(self.slot_of[c], k) for k, cl in enumerate(classes) for c in cl], dtype=np.int64)
        pairs = pairs.reshape(-1, 2)
        shape = (len(pool), len(classes))
        self.member = sparse.csr_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=shape)
        self.n_pool = len(pool)

    def weights(
        self, offsets: IntArray, concept_ids: npt.NDArray[np.integer], concept_acts: npt.NDArray[np.floating]
    ) -> sparse.csr_matrix:
        """rows × classes: each row's summed s̃ of each class's members (CSR rows, offsets start at 0)."""
        n = len(offsets) - 1
        slots = self.slot_of[np.asarray(concept_ids, dtype=np.int64)]
        acts = np.asarray(concept_acts, dtype=np.float64)
        hit = slots >= 0
        hit[hit] &= fires(acts[hit], self.threshold[slots[hit]])
        row_of = np.repeat(np.arange(n), np.diff(offsets))[hit]
        inc = sparse.csr_matrix((acts[hit], (row_of, slots[hit])), shape=(n, self.n_pool))
        return (inc @ self.member).tocsr()


@dataclass(frozen=True)
class ModeClass:
    """A candidate failure mode: its concepts (the leading one first) and every row where one is active."""

    members: tuple[int, ...]
    rows: IntArray  # frame positions, ascending


def shared_rows(a: IntArray, b: IntArray) -> int:
    """How many rows two sorted, duplicate-free row arrays share: a binary search of the smaller in the larger
    (np.intersect1d sorts both again, which dominated on a million rows)."""
    small, large = (a, b) if a.size <= b.size else (b, a)
    if not small.size or not large.size:
        return 0
    at = np.minimum(np.searchsorted(large, small), large.size - 1)
    return int(np.count_nonzero(large[at] == small))


Overlap = Callable[["ModeClass", "ModeClass"], int]
Join = Callable[["ModeClass", "ModeClass"], "ModeClass"]  # (the better mode, one that is the same effect) -> the mode


def _union(a: ModeClass, b: ModeClass) -> ModeClass:
    members = a.members + tuple(m for m in b.members if m not in a.members)
    return ModeClass(members, np.union1d(a.rows, b.rows))


def merge_contained(
    classes: list[ModeClass], contained: float = CONTAINED, shared: Overlap | None = None, join: Join = _union
) -> list[ModeClass]:
    """In rank order, each class whose rows lie mostly inside a better kept one's joins it (`shared`: the rows
    two classes share, memoised by the caller across splits; default `shared_rows`; `join`: how, default their
    union). Only that way round: a broader class holding a better one is another finding, and merging it would
    dilute the better one."""
    overlap = shared or (lambda x, y: shared_rows(x.rows, y.rows))
    kept: list[ModeClass] = []
    for c in classes:
        for j, k in enumerate(kept):
            inter = overlap(c, k)
            if inter >= contained * max(c.rows.size, 1):
                kept[j] = join(k, c)
                break
        else:
            kept.append(c)
    return kept


def merge_by_terms(
    classes: list[ModeClass], words_of: Callable[[tuple[int, ...]], set[str]], join: Join = _union
) -> list[ModeClass]:
    """In rank order, each class whose first terms share a content word with a better kept one's joins it
    (`join`, default their union; compared with the kept class's own words, so merges do not chain through a
    broad union)."""
    kept: list[tuple[ModeClass, set[str]]] = []
    for c in classes:
        words = words_of(c.members)
        for j, (k, kw) in enumerate(kept):
            if words & kw:
                kept[j] = (join(k, c), kw)
                break
        else:
            kept.append((c, words))
    return [k for k, _ in kept]


def training_rank(
    classes: list[ModeClass], train: npt.NDArray[np.bool_], scores: FloatArray, expected: FloatArray
) -> list[ModeClass]:
    """Classes in rank order on the choosing rows (`train`: a split's scored choosing rows): the upper end of
    the Wilson interval of their mean score, less their mean cell mean, ascending; < 2 rows are dropped."""
    keys = []
    for i, c in enumerate(classes):
        key = training_key(c, train, scores, expected)
        if key is not None:
            keys.append((*key, i))
    return [classes[i] for *_, i in sorted(keys)]


def training_key(
    c: ModeClass, train: npt.NDArray[np.bool_], scores: FloatArray, expected: FloatArray
) -> tuple[float, int] | None:
    """`training_rank`'s key of one class (smaller ranks first); None under 2 choosing rows."""
    t = c.rows[train[c.rows]]
    if t.size < 2:
        return None
    _low, high = wilson_interval(np.array([scores[t].mean()]), np.array([float(t.size)]))
    return float(high[0]) - float(expected[t].mean()), -int(t.size)


def sharpen(
    c: ModeClass,
    member_rows: Callable[[int], IntArray],
    train: npt.NDArray[np.bool_],
    scores: FloatArray,
    expected: FloatArray,
) -> ModeClass:
    """The class less the members that do not carry its effect on the rows only they add (`member_rows`: where
    a concept fires). On the choosing rows, a member whose own rows (those no other kept member fires on) lie
    less than `ADDED_EFFECT` as far below their cells as the class's other rows is dropped, the weakest of
    them by its own evidence (`training_key`) first, until every kept member passes. Grouping and merging
    look at shared rows and words, not scores: a broad concept whose s̃ is high on the effect's rows ranks
    first and lets the effect's own concept in, or joins it, and its weak tail on other rows then halves the
    effect the test half sees. Unchanged (the same object) when every member passes."""
    if len(c.members) < 2:
        return c
    t = c.rows[train[c.rows]]
    resid = scores[t] - expected[t]
    fire = np.array([np.isin(t, member_rows(m), assume_unique=True) for m in c.members])
    keep = np.ones(len(c.members), bool)
    while keep.sum() > 1:
        count = fire[keep].sum(axis=0)
        failing = []
        for i in np.flatnonzero(keep):
            own, rest = fire[i] & (count == 1), count - fire[i] > 0
            if own.any() and rest.any():
                base = float(resid[rest].mean())
                if base < 0 and float(resid[own].mean()) > ADDED_EFFECT * base:
                    failing.append(int(i))
        if not failing:
            break
        keep[max(failing, key=lambda i: _evidence(c.members[i], member_rows, train, scores, expected))] = False
    if keep.all():
        return c
    members = tuple(m for m, k in zip(c.members, keep, strict=True) if k)
    return ModeClass(members, np.unique(np.concatenate([member_rows(m) for m in members])))


def _evidence(
    m: int,
    member_rows: Callable[[int], IntArray],
    train: npt.NDArray[np.bool_],
    scores: FloatArray,
    expected: FloatArray,
) -> tuple[float, int]:
    """A member's own `training_key` (larger: weaker); under 2 choosing rows, the weakest."""
    return training_key(ModeClass((m,), member_rows(m)), train, scores, expected) or (np.inf, 0)


def sharper_join(train: npt.NDArray[np.bool_], scores: FloatArray, expected: FloatArray) -> Join:
    """A `Join` that unites two modes of one effect only when the rows the other would add carry the effect:
    on the choosing rows, their mean residual is at least `ADDED_EFFECT` of the better mode's (both below
    their cells); otherwise the better one absorbs the other as it is. A broad concept that shares a word or
    most of its rows with a sharp mode (every GSM8K problem that mentions money, beside those with a dollar
    amount) would otherwise swell it and dilute its effect below what the test half can show; fragments of
    one effect (the figure's "draw" and "linewidth") still unite, as the rows each adds score as low."""

    def residual(rows: IntArray) -> float | None:
        t = rows[train[rows]]
        return float((scores[t] - expected[t]).mean()) if t.size else None

    def join(better: ModeClass, other: ModeClass) -> ModeClass:
        united = _union(better, other)
        added = np.setdiff1d(other.rows, better.rows, assume_unique=True)
        base, extra = residual(better.rows), residual(added)
        if extra is None or base is None or base >= 0 or extra <= ADDED_EFFECT * base:
            return united
        return better

    return join
