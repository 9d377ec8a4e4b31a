"""Failure modes judged over repeated splits (docs/failure_modes.md, docs/findings.md).

Each split builds its modes from its own choosing half — groups its pool of concepts by co-activation, ranks
the groups on its rows against its own cell means, merges those with the same rows or the same strong words,
so one effect is one mode, and keeps a member only where the rows it alone adds carry the effect — and tests
its first top-k on its test half, each mode as the rule it is: the rows where any of its concepts fires.
Nothing is re-chosen or linked before it is tested. Modes of different splits that are one effect
(`_identities`: they share most of their rows, or a concept and most of the smaller's rows) are one finding,
judged over the splits by the decision rule (`decision.judge`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial

import numpy as np
from scipy import sparse

from cg_ray.arrays import IntArray
from cg_ray.config import MetricsConfig
from cg_ray.profile.classterms import ClassTerms
from cg_ray.profile.decision import Judged, Observer, SplitTest, Verdict, judge
from cg_ray.profile.grouping import group_near_duplicates, jaccard_from_counts
from cg_ray.profile.modes import (
    TERMS_COMPARED,
    ModeClass,
    merge_by_terms,
    merge_contained,
    shared_rows,
    sharpen,
    sharper_join,
    training_rank,
)
from cg_ray.profile.pool import PoolRows
from cg_ray.profile.splits import SplitPlan
from cg_ray.profile.strata import RowFrame
from cg_ray.profile.terms import Terms, content_words

DESCRIBED_PER_TESTED = 2  # modes a split describes (and may merge by their terms), per mode it tests
STRONG_SHARE = 0.5  # a term merges modes only when at least this share of both modes' rows hold it
MAX_ROW_SHARE = 0.5  # a candidate mode holds at most this share of the rows
SAME_ROWS = 0.5  # modes of two splits with this row Jaccard are one finding
SHARED_CONCEPT_INSIDE = 0.5  # ... or sharing a concept, with this share of the smaller's rows in the other's
INSIDE = 0.8  # ... or with this share of the smaller's rows in the other's
JOIN_INSIDE = 2 / 3  # a concept joins a mode only with at least this share of its rows inside the leader's

TestedMode = tuple[int, int]  # (split, the mode's place among those the split tested)


def split_modes(
    plan: SplitPlan,
    frame: RowFrame,
    chosen_below: list[list[int]],
    pool: PoolRows,
    terms_of: ClassTerms,
    cfg: MetricsConfig,
    observe: Observer | None = None,
) -> list[tuple[ModeClass, Verdict]]:
    """Every failure mode some split tested, as one finding per effect with its verdict over the splits."""
    pooled = sorted({c for chosen in chosen_below for c in chosen})
    if not pooled or not plan.splits:
        return []
    inter = pool.intersections(pooled)
    # A concept joins a group only when it overlaps the group's leader (Jaccard ≥ mode_jaccard) AND most of its
    # own rows lie inside the leader's: a broad concept (every GSM8K problem) must not swell a sharp one's mode
    # (its problems with a dollar amount) to its own rows and dilute the effect away.
    inside = inter / np.maximum(np.diag(inter), 1)[:, None]  # [i, r]: the share of i's rows in r's
    sim = np.where(inside >= JOIN_INSIDE, jaccard_from_counts(inter), 0.0)
    slot = {c: i for i, c in enumerate(pooled)}
    ranked: list[list[ModeClass]] = []
    joins, sharps = [], []
    memo: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}

    def shared(a: ModeClass, b: ModeClass) -> int:  # the splits merge nearly the same classes again and again
        key = (a.members, b.members)
        if key not in memo:
            memo[key] = shared_rows(a.rows, b.rows)
        return memo[key]

    for split, head in zip(plan.splits, chosen_below, strict=True):  # head: the concepts the split chose
        idx = np.array([slot[c] for c in head], dtype=np.int64)
        rep = group_near_duplicates(sim[np.ix_(idx, idx)], -np.arange(len(head), dtype=np.float64), cfg.mode_jaccard)
        groups: dict[int, list[int]] = {}
        for s, r in enumerate(rep):
            groups.setdefault(int(r), []).append(head[s])
        choosing = split.choosing & frame.scored
        expected = split.expected
        # Every member must carry the effect on the rows only it adds, once grouped and again once merged.
        sharp = partial(sharpen, member_rows=_firing(pool), train=choosing, scores=frame.scores, expected=expected)
        classes = [sharp(ModeClass(tuple(g), pool.members(g)[0])) for _, g in sorted(groups.items())]
        # A group on most of the suite is the suite, not a mode of it (its residual is ≈ 0 by construction,
        # and its tight interval would rank it first among the noise).
        classes = [c for c in classes if c.rows.size <= MAX_ROW_SHARE * frame.n_rows]
        join = sharper_join(choosing, frame.scores, expected)
        ranked.append(
            merge_contained(training_rank(classes, choosing, frame.scores, expected), shared=shared, join=join)[
                : DESCRIBED_PER_TESTED * cfg.tested_per_split
            ]
        )
        joins.append(join)
        sharps.append(sharp)
    # Each split merges by terms against the cells of its own fields: the run's fields were picked with every
    # row's score, which a split's choosing must not see.
    terms_by_fields = {
        tuple(fields): terms_of.for_cells(fields) for fields in {tuple(s.adjusted_for) for s in plan.splits}
    }
    tested: dict[TestedMode, ModeClass] = {}
    tests: dict[TestedMode, tuple[SplitTest, int]] = {}
    for split, classes, join, sharp in zip(plan.splits, ranked, joins, sharps, strict=True):
        terms = terms_by_fields[tuple(split.adjusted_for)].compute(
            {c.members: pool.members(c.members) for c in classes}
        )
        strong = {m: _strong_words(t) for m, t in terms.items()}
        merged = [sharp(m) for m in merge_by_terms(classes, partial(_words_of, strong), join)]
        merged = [m for m in merged if m.rows.size <= MAX_ROW_SHARE * frame.n_rows]
        for j, c in enumerate(merged[: cfg.tested_per_split]):
            tested[(split.index, j)] = c
            tests[(split.index, j)] = (split.by_cell.contrast(c.rows), j + 1)
    findings = _identities(tested, frame.n_rows)
    finding_of = {key: f for f, keys in enumerate(findings) for key in keys}
    per_split: list[list[tuple[int, SplitTest, int]]] = [[] for _ in plan.splits]
    for key, (t, rank) in tests.items():
        per_split[key[0]].append((finding_of[key], t, rank))
    verdicts = judge(per_split, plan.n_splits, plan.fdr, (-1.0, 1.0))
    found = [(_representative([tested[k] for k in keys]), verdicts[f]) for f, keys in enumerate(findings)]
    if observe is not None:
        shown = {f: m.members for f, (m, _) in enumerate(found)}
        observe(Judged("failure_modes", per_split, plan.n_splits, plan.fdr, verdicts, shown))
    return found


def _firing(pool: PoolRows) -> Callable[[int], IntArray]:
    return lambda c: pool.firing(c)[0]


def _words_of(strong: dict[object, set[str]], members: object) -> set[str]:
    return strong.get(members, set())


def _strong_words(terms: Terms | None) -> set[str]:
    """The content words of a class's first terms that most of its rows hold: a term in a fifth of a broad
    concept's rows (a random concept that happens to touch the figure rows) merges nothing."""
    if terms is None:
        return set()
    strong = [t for t, share in zip(terms.terms[:TERMS_COMPARED], terms.share, strict=False) if share >= STRONG_SHARE]
    return content_words(strong)


def _one_effect(inter: int, a: ModeClass, b: ModeClass) -> bool:
    """Two tested modes are one effect (`inter`: the rows they share)."""
    smaller = max(min(a.rows.size, b.rows.size), 1)
    if inter >= SAME_ROWS * (a.rows.size + b.rows.size - inter) or inter >= INSIDE * smaller:
        return True
    return bool(set(a.members) & set(b.members)) and inter >= SHARED_CONCEPT_INSIDE * smaller


def _identities(tested: dict[TestedMode, ModeClass], n_rows: int) -> list[list[TestedMode]]:
    """The tested modes grouped into findings (union-find over `_one_effect`), in first-seen order. The same
    rule chosen by several splits is one finding outright; the rows shared by distinct rules come from one
    sparse product, not a pairwise loop over row lists."""
    if not tested:
        return []
    rules: dict[tuple[int, ...], int] = {}
    for mode in tested.values():
        rules.setdefault(mode.members, len(rules))
    first = {rules[m.members]: m for m in reversed(list(tested.values()))}
    cols = [first[r].rows for r in range(len(rules))]
    incidence = sparse.csc_matrix(
        (
            np.ones(sum(c.size for c in cols)),
            (np.concatenate(cols), np.repeat(np.arange(len(cols)), [c.size for c in cols])),
        ),
        shape=(n_rows, len(cols)),
    )
    inter = np.rint((incidence.T @ incidence).toarray()).astype(np.int64)
    parent = list(range(len(rules)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(rules)):
        for j in range(i + 1, len(rules)):
            if inter[i, j] and root(i) != root(j) and _one_effect(int(inter[i, j]), first[i], first[j]):
                parent[root(j)] = root(i)
    out: dict[int, list[TestedMode]] = {}
    for key, mode in tested.items():
        out.setdefault(root(rules[mode.members]), []).append(key)
    return list(out.values())


def _representative(classes: list[ModeClass]) -> ModeClass:
    """The rule shown for a finding: the one whose rows agree best with every rule the splits tested as it
    (the largest summed row Jaccard, each tested rule counted as often as it was chosen; ties: chosen more
    often, then more rows). The most often chosen rule alone could be a side rule that one broad union
    linked to the effect (a concept on a third of the dollar rows), not the effect's own face."""
    counts = Counter(c.members for c in classes)
    rules = list({c.members: c for c in classes}.values())

    def agreement(a: ModeClass) -> float:
        total = 0.0
        for b in rules:
            inter = shared_rows(a.rows, b.rows)
            total += counts[b.members] * inter / max(a.rows.size + b.rows.size - inter, 1)
        return total

    return max(rules, key=lambda c: (agreement(c), counts[c.members], c.rows.size))
