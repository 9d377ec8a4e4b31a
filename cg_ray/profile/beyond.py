"""Beyond what the metadata says: slices, residual gaps, failure modes and distinctive terms of one run, each
finding chosen on some rows and confirmed on others (docs/trust.md).

`ResidualPass` reads rows.parquet's light columns once (`strata.read_frame`), picks the fields to adjust for,
splits the rows into folds of groups (`crossfit.plan_folds`) and accumulates the residual gaps per fold from
the batches of the metrics' own pass over the activations. `finish` judges the slices fold by fold.
`describe_classes` streams the activations once more for the concepts any fold may use (`crossfit.PoolRows`),
judges the concepts and builds, judges and describes the failure modes (`modes.py`, `classterms.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.row_batch import RowBatch
from cg_ray.artifacts.rows import RowsFile, iter_row_batches
from cg_ray.config import MetricsConfig
from cg_ray.labels import ConceptLabels
from cg_ray.metrics.compute import CGResult
from cg_ray.profile.classterms import TEXT_COLUMNS, ClassTerms, read_texts
from cg_ray.profile.crossfit import (
    ConceptCandidates,
    FoldPlan,
    PoolRows,
    SliceFinding,
    Tests,
    concept_candidates,
    concept_verdicts,
    fold_judgements,
    plan_folds,
    rank_key,
    slice_findings,
)
from cg_ray.profile.grouping import group_near_duplicates, jaccard_from_counts
from cg_ray.profile.heldout import FoldTest, Verdict, combine, not_tested
from cg_ray.profile.modes import TERMS_COMPARED, ModeClass, merge_by_terms, merge_contained, training_rank
from cg_ray.profile.ranking import eligible
from cg_ray.profile.residual import ResidualAccumulator, Residuals, residual_order
from cg_ray.profile.slices import Slice, best_fields, example_rows, weakest_slices
from cg_ray.profile.strata import RowFrame, expected_scores, parse_adjust_for, read_frame
from cg_ray.profile.terms import Terms, content_words

__all__ = ["TEXT_COLUMNS", "Beyond", "ResidualPass", "describe_classes", "read_texts", "slices_file"]

CANDIDATE_FACTOR = 2  # modes a fold describes (and may merge by their terms), per mode it tests
STRONG_SHARE = 0.5  # a term merges modes only when at least this share of both modes' rows hold it
MAX_ROW_SHARE = 0.5  # a candidate mode holds at most this share of the rows
SAME_ROWS = 0.5  # fold modes of different folds with this row Jaccard (and a shared concept) are one finding
EXAMPLES = 3


@dataclass
class Beyond:
    frame: RowFrame
    slices: list[Slice]  # in-sample, for `--adjust-for auto`
    adjusted_for: list[str]
    notes: list[str]
    expected: npt.NDArray[np.float64]
    residuals: Residuals  # in-sample, every row
    order: npt.NDArray[np.int64]  # eligible concepts with a negative residual, most confidently first
    plan: FoldPlan
    acc: ResidualAccumulator
    candidates: ConceptCandidates
    slice_findings: list[SliceFinding] = field(default_factory=list)
    concept_verdicts: dict[tuple[int, str], Verdict] = field(default_factory=dict)
    modes: pa.Table | None = None
    terms: dict[int, Terms] = field(default_factory=dict)  # profile concept → its rows' distinctive terms
    n_mode_candidates: int = 0

    def summary(self) -> dict[str, Any]:
        modes = [] if self.modes is None else self.modes.column("confirmed").to_pylist()
        return {
            "adjusted_for": self.adjusted_for,
            "notes": self.notes,
            "fields": {name: len(v) for name, v in self.frame.values.items()},
            "skipped_fields": self.frame.skipped,
            "n_slices": len(self.slice_findings),
            "n_failure_modes": len(modes),
            "crossfit": {
                **self.plan.summary(),
                "candidates": {
                    "failure_modes": self.n_mode_candidates,
                    "slices": len(self.slice_findings),
                    "concepts": len(self.concept_verdicts),
                },
                "confirmed": {
                    "failure_modes": int(sum(modes)),
                    "slices": sum(f.verdict.confirmed for f in self.slice_findings),
                    "concepts": sum(v.confirmed for v in self.concept_verdicts.values()),
                },
            },
        }

    def concept_verdict(self, c: int, direction: str = "less") -> Verdict:
        return self.concept_verdicts.get((c, direction), not_tested())


class ResidualPass:
    """The residual gaps, accumulated batch by batch beside the metrics' own pass (`observe` is handed every
    batch the aggregation streams), per fold of the cross-fitting, so the activations are read once for all.
    The metadata frame, the fields adjusted for, the folds and the cell means come first, from the light
    columns alone."""

    def __init__(
        self, rows: RowsFile, model: str | None, cfg: MetricsConfig, scores: npt.NDArray[np.float64] | None = None
    ) -> None:
        self.frame = read_frame(rows, model)
        if scores is not None:  # the null check: the same rows with other scores (same rows scored)
            self.frame.scores = np.asarray(scores, dtype=np.float64)
        fr = self.frame
        self.cfg = cfg
        self.slices = weakest_slices(fr, cfg.top_k, cfg.slice_order, cfg.slice_min_rows) if fr.codes else []
        self.adjusted_for, self.notes = parse_adjust_for(cfg.adjust_for, fr, best_fields(self.slices))
        self.expected = expected_scores(fr, self.adjusted_for)
        self.plan = plan_folds(rows, fr, self.adjusted_for, cfg)
        if self.plan.skipped:
            self.notes.append(self.plan.skipped)
        self.acc = ResidualAccumulator(rows.d_sae, folds=cfg.folds)
        self.seen = 0
        self.path = rows.path

    def observe(self, batch: RowBatch) -> None:
        here = slice(self.seen, self.seen + len(batch))
        self.acc.add(
            batch.offsets,
            batch.concept_ids,
            batch.concept_acts,
            self.frame.scores[here],  # the frame's: the batch's own unless the null check replaced them
            self.expected[here],
            self.plan.fold[here],
        )
        self.seen += len(batch)

    def finish(self, result: CGResult) -> Beyond:
        _check_streamed(self.path, self.seen, self.frame)
        res = self.acc.finish()
        order = residual_order(res, eligible(result) & (np.nan_to_num(res.residual) < 0))
        beyond = Beyond(
            self.frame,
            self.slices,
            self.adjusted_for,
            self.notes,
            self.expected,
            res,
            order,
            self.plan,
            self.acc,
            concept_candidates(self.acc, result, self.cfg.top_k, skipped=self.plan.skipped is not None),
        )
        beyond.slice_findings = slice_findings(self.frame, self.plan, self.cfg)
        return beyond


def _positions(rows: RowsFile, model: str | None, frame: RowFrame) -> Iterator[tuple[int, RowBatch]]:
    """(first frame position, batch) over the model's rows; the frame holds the same rows in the same order."""
    start = 0
    for batch in iter_row_batches(rows, model=model):
        yield start, batch
        start += len(batch)
    _check_streamed(rows.path, start, frame)


def _check_streamed(path: Path, seen: int, frame: RowFrame) -> None:
    if seen != frame.n_rows:  # the activations and the metadata frame must be the same rows, in order
        raise RuntimeError(f"{path}: {seen} rows streamed but {frame.n_rows} in the metadata frame")


def describe_classes(
    rows: RowsFile,
    model: str | None,
    beyond: Beyond,
    cfg: MetricsConfig,
    concepts: Sequence[int],
    labels: ConceptLabels | None = None,
    seed: int = 0,
) -> None:
    """Fill `beyond.concept_verdicts`, `beyond.modes` (failure_modes.parquet) and `beyond.terms` (for the
    given profile concepts)."""
    pool = PoolRows(beyond.candidates.pool() | {int(c) for c in concepts}, rows.d_sae)
    for _, batch in _positions(rows, model, beyond.frame):
        pool.add(batch.offsets, batch.concept_ids, batch.concept_acts)
    pool.finish()
    beyond.concept_verdicts = concept_verdicts(beyond.candidates, pool, beyond.frame, beyond.plan)
    book = ClassTerms(rows, beyond.frame, beyond.adjusted_for, seed)
    found = fold_modes(beyond, pool, book, cfg)
    beyond.n_mode_candidates = len(found)
    shown = sorted(found, key=lambda m: rank_key(m[1]))[: cfg.top_k]
    wanted: dict[object, tuple[Any, Any]] = {m.members: pool.members(m.members) for m, _ in shown}
    wanted.update({(int(c),): pool.members([int(c)]) for c in concepts})
    terms = book.compute(wanted)
    beyond.terms = {int(c): terms[(int(c),)] for c in concepts}
    named = {c: lab for m, _ in shown for c in m.members if (lab := labels.get(c) if labels else None)}
    rng = np.random.default_rng(seed)
    beyond.modes = modes_table([(m, v, terms[m.members], _examples(m, beyond, rng)) for m, v in shown], beyond, named)


def fold_modes(beyond: Beyond, pool: PoolRows, book: ClassTerms, cfg: MetricsConfig) -> list[tuple[ModeClass, Verdict]]:
    """Each fold builds its failure modes from its own training part — group its concepts, rank the groups,
    merge those with the same rows or words — and tests the first top_k on its held-out rows; modes of
    different folds sharing a concept are one finding, judged over the folds (`heldout.combine`)."""
    plan, frame = beyond.plan, beyond.frame
    heads = [[int(c) for c in below] for below in beyond.candidates.below]
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
            merge_contained(training_rank(classes, train, frame.scores, beyond.expected))[
                : CANDIDATE_FACTOR * cfg.top_k
            ]
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


def _examples(mode: ModeClass, beyond: Beyond, rng: np.random.Generator) -> list[str]:
    """A seeded random draw of the mode's rows that score below their cell: what its failing rows look like,
    not the ones picked to show its terms."""
    pos = mode.rows
    r = beyond.frame.scores[pos] - beyond.expected[pos]
    failing = pos[np.nan_to_num(r, nan=0.0) < 0]
    if failing.size == 0:
        return []
    picked = np.sort(rng.choice(failing, size=min(EXAMPLES, failing.size), replace=False))
    return [beyond.frame.row_id(int(p)) for p in picked]


def _f(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def mode_description(terms: Terms, members: Sequence[int], labels: dict[int, str]) -> str:
    # The terms alone: each term's share of the mode's rows (and of its cells' other rows) is shown beside it.
    sentence = "Rows with " + ", ".join(f"“{t}”" for t in terms.terms) if terms.terms else None
    # Free-text labels only: a token-list label ("'-' | 'ix' | '2'") comes from the SAE's labelling corpus and
    # says less about these rows than their own terms.
    named = [labels[c] for c in members if labels.get(c) and " | " not in labels[c]]
    if sentence and named:
        return f"{sentence}; concepts: {', '.join(named[:2])}"
    if sentence:
        return sentence
    if named:
        return f"Rows where {', '.join(named[:2])}"
    return f"Rows where concept{'s' if len(members) > 1 else ''} {', '.join(map(str, members[:3]))} fire"


def verdict_columns(v: Verdict) -> dict[str, Any]:
    return {
        "p_value": v.p_value,
        "q_value": v.q_value,
        "confirmed": v.confirmed,
        "folds_selected": v.folds_selected,
        "n_heldout": v.n_heldout,
        "n_clusters": v.n_clusters,
    }


def modes_table(
    modes: list[tuple[ModeClass, Verdict, Terms, list[str]]], beyond: Beyond, labels: dict[int, str] | None = None
) -> pa.Table:
    fr = beyond.frame
    records = []
    for rank, (m, v, t, ex) in enumerate(modes, start=1):
        scored = m.rows[fr.scored[m.rows]]
        mean = float(fr.scores[scored].mean()) if scored.size else None
        expected = float(beyond.expected[scored].mean()) if scored.size else None
        records.append(
            {
                "rank": rank,
                "description": mode_description(t, m.members, labels or {}),
                "terms": t.terms,
                "term_shares": t.share,
                "background_shares": t.background,
                "concept_ids": list(m.members),
                "n_rows": int(m.rows.size),
                "n_scored": int(scored.size),
                "mean_score": mean,
                "expected_score": expected,
                "residual": _f(v.estimate),
                "residual_low": _f(v.low),
                "residual_high": _f(v.high),
                "residual_in_sample": None if mean is None or expected is None else mean - expected,
                **verdict_columns(v),
                "adjusted_for": beyond.adjusted_for,
                "example_row_ids": ex,
            }
        )
    return pa.Table.from_pylist(records, schema=S.FAILURE_MODES_SCHEMA)


def slices_file(beyond: Beyond) -> pa.Table:
    fr = beyond.frame
    records = [
        {
            "rank": rank,
            "slice": f.slice.text(fr),
            "conditions": __import__("json").dumps(f.slice.as_dict(fr), ensure_ascii=False),
            "n_rows": f.slice.n_rows,
            "mean_score": _f(f.verdict.estimate),
            "low": _f(f.verdict.low),
            "high": _f(f.verdict.high),
            "mean_in_sample": f.slice.mean_score,
            "suite_mean": f.suite_mean,
            **verdict_columns(f.verdict),
            "example_row_ids": example_rows(fr, f.slice.mask(fr)),
        }
        for rank, f in enumerate(beyond.slice_findings, start=1)
    ]
    return pa.Table.from_pylist(records, schema=S.SLICES_SCHEMA)
