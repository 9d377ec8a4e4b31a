"""The diff's findings judged as every run's findings are (docs/compare.md, "Held out"; docs/findings.md).

The bootstrap lists of `cg-ray diff` are per-concept intervals on all the paired rows: among N eligible
concepts that did not change, about N·(1 − confidence)/2 per direction still exclude 0. A *finding* here is a
rule on rows — "the paired rows where concept c fires changed by more (or less) than the other rows of their
benchmark" — chosen on one half of each of R stratified splits of the paired rows and tested, as that same
rule, on the other half: the score change d = B − A of its rows (c fires where the mean of A's and B's s̃
reaches `firing_threshold`, score-free) against the half's other rows of the same benchmark
(`profile.heldout.HeldOut.contrast`, rows as clusters; its variance floored as for a Bernoulli share of
changed rows, so a rule whose rows all flipped is never certain), one-sided in the direction the choosing
half saw. Each split's tries get weighted Benjamini–Hochberg q-values and the splits' q-values are combined
by their median × 2 (`profile.decision.judge`): confirmed ⇔ q ≤ fdr, the interval excluding 0 whenever confirmed.
The change is relative to the benchmark's own change (as a run's findings are relative to their cells), so
a model better everywhere by the same amount has no finding, and the bootstrap's ΔX_model lists stay beside
it, descriptive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from cg_ray.arrays import BoolArray, FloatArray, IntArray
from cg_ray.compare.bootstrap import PairedSample
from cg_ray.metrics.firing import firing
from cg_ray.profile.decision import GREATER, LESS, Alternative, SplitTest, Verdict, judge
from cg_ray.profile.groups import grouped_split
from cg_ray.profile.heldout import HeldOut

BOUNDS = (-2.0, 2.0)  # a contrast of two score changes in [-1, 1]
SAME_ROWS_JACCARD = 0.5  # two confirmed findings whose firing rows overlap this much are one effect, said so
DIRECTIONS: dict[str, Alternative] = {"regressed": LESS, "improved": GREATER}


@dataclass(frozen=True)
class HeldOutChanges:
    """Per direction, each concept (column of the sample) any split chose, with its verdict: confirmed first
    (by the interval's end nearest 0), then the candidates by q-value."""

    regressed: list[tuple[int, Verdict]]
    improved: list[tuple[int, Verdict]]
    # per direction: a confirmed finding → the earlier confirmed one whose firing rows it shares (Jaccard ≥ 0.5)
    same_rows: dict[str, dict[int, int]]
    splits: int
    fdr: float
    tried_per_split: int

    def n_confirmed(self, direction: str) -> int:
        return sum(v.confirmed for _, v in getattr(self, direction))

    def n_effects(self, direction: str) -> int:
        """Confirmed findings, those on the same rows as an earlier confirmed one counted once with it."""
        return self.n_confirmed(direction) - len(self.same_rows[direction])


def _half_ranking(
    weights: sparse.csr_matrix, change: FloatArray, codes: IntArray, n_benchmarks: int, half: BoolArray
) -> tuple[FloatArray, FloatArray, IntArray]:
    """Per concept on one half: the mean change of its firing rows (`weights`: 1 where it fires) beyond their
    benchmark's mean change, an approximate standard error (rows independent, the benchmark means taken as
    known: a ranking, not a test) and its firing rows. Vectorised over all concepts: a few sparse products."""
    rows = np.flatnonzero(half)
    w = weights[rows]
    d = change[rows]
    c = codes[rows]
    n_b = np.bincount(c, minlength=n_benchmarks).astype(np.float64)
    mean_b = np.bincount(c, weights=d, minlength=n_benchmarks) / np.maximum(n_b, 1.0)
    e = d - mean_b[c]
    total = np.asarray(w.sum(axis=0)).ravel()
    w2 = w.multiply(w).tocsc()
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = (w.T @ e) / total
        spread = (w2.T @ (e * e)) - 2 * theta * (w2.T @ e) + theta * theta * np.asarray(w2.sum(axis=0)).ravel()
        se = np.sqrt(np.maximum(spread, 0.0)) / total
    active = np.asarray((w > 0).sum(axis=0)).ravel().astype(np.int64)
    return theta, se, active


def firing_rows(acts: sparse.csc_matrix) -> sparse.csr_matrix:
    """1 where a concept fires (s̃ at least `firing_threshold` of its own activations over the paired rows,
    score-free: its weak tails on unrelated text would dilute the rule, docs/findings.md), else 0."""
    _, fires = firing(acts.tocsc())
    fires.data = np.ones_like(fires.data, dtype=np.float64)
    return fires.tocsr()


def judge_changes(
    sample: PairedSample, *, min_rows: int, tried: int, splits: int, fdr: float, seed: int
) -> HeldOutChanges:
    """The concepts whose rows changed beyond their benchmark, judged over `splits` splits (module doc)."""
    weights = firing_rows(((sample.acts_a + sample.acts_b) * 0.5).tocsc())
    change = np.asarray(sample.scores_b - sample.scores_a, dtype=np.float64)
    codes = np.asarray(sample.codes, dtype=np.int64)
    rows = np.arange(codes.size)
    need = max(2, math.ceil(min_rows / 2))  # active rows on the choosing half
    per_split: dict[str, list[list[tuple[int, SplitTest, int]]]] = {k: [] for k in DIRECTIONS}
    weights_csc = weights.tocsc()
    for s in range(splits):
        test = grouped_split(codes, rows, 0.5, seed + s)
        theta, se, active = _half_ranking(weights, change, codes, sample.n_benchmarks, ~test)
        z = np.where((active >= need) & (se > 0), theta / np.where(se > 0, se, 1.0), 0.0)
        held = HeldOut.of(np.flatnonzero(test), change, codes, rows, floor_values=np.abs(change))
        for name, side in DIRECTIONS.items():
            signed = z if side == GREATER else -z
            ok = np.flatnonzero(signed > 0)
            chosen = ok[np.argsort(-signed[ok], kind="stable")[:tried]]
            entries = []
            for rank, col in enumerate(chosen, start=1):
                column = weights_csc[:, int(col)]
                positions = column.indices[column.data > 0]
                on_test = test[positions]
                contrast = held.contrast(positions[on_test], column.data[column.data > 0][on_test], side)
                entries.append((int(col), contrast, rank))
            per_split[name].append(entries)
    verdicts = {name: judge(per_split[name], splits, fdr, BOUNDS) for name in DIRECTIONS}
    ordered = {name: in_order(verdicts[name], side) for name, side in DIRECTIONS.items()}
    return HeldOutChanges(
        regressed=ordered["regressed"],
        improved=ordered["improved"],
        same_rows={name: _same_rows(weights_csc, found) for name, found in ordered.items()},
        splits=splits,
        fdr=fdr,
        tried_per_split=tried,
    )


def _same_rows(fires: sparse.csc_matrix, found: list[tuple[int, Verdict]]) -> dict[int, int]:
    """Each confirmed finding whose firing rows overlap an earlier confirmed one's by Jaccard ≥ SAME_ROWS_JACCARD
    (two concepts of one effect, e.g. two '%' concepts on the questions with a percentage) → that one."""
    confirmed = [c for c, v in found if v.confirmed]
    rows = {c: set(fires[:, c].indices.tolist()) for c in confirmed}
    out: dict[int, int] = {}
    for i, c in enumerate(confirmed):
        for earlier in confirmed[:i]:
            union = len(rows[c] | rows[earlier])
            if earlier not in out and union and len(rows[c] & rows[earlier]) / union >= SAME_ROWS_JACCARD:
                out[c] = earlier
                break
    return out


def in_order(verdicts: dict[int, Verdict], side: Alternative) -> list[tuple[int, Verdict]]:
    """Confirmed first, by the end of their interval nearest 0; then the candidates by q-value, those more
    splits chose first (a candidate one split chose has q = 1 and no interval)."""

    def key(item: tuple[int, Verdict]) -> tuple[int, float, float, int]:
        v = item[1]
        nearest = (v.high if side == LESS else None if v.low is None else -v.low) if v.confirmed else None
        return (0 if v.confirmed else 1, nearest if nearest is not None else v.q_value, v.q_value, -v.splits_selected)

    return sorted(verdicts.items(), key=key)
