"""Which rows of real use a benchmark does not reach: the row-level view of coverage (docs/method.md,
"Where the benchmark has no rows").

Per concept, a theme the benchmark never asks shows only as a small excess (every latent of a real reader
also fires on a background of other rows). Per *row*, it is plain: a question form or topic is where the
reference has rows and the benchmark has almost none. So:

1. **Density ratio per row.** A classifier tells benchmark rows from reference rows by which concepts
   fire (one firing rule for both, `metrics.firing`), with balanced class weights so that its odds estimate
   the ratio of the two densities, r(x) = p_bench(x) / p_reference(x). It is cross-fitted over the rows'
   groups (`folds`, scikit-learn's StratifiedGroupKFold): no row is scored by a model that saw it or its
   template. Each fold's model reads only the concepts its training rows show the reference using more
   (`excess_concepts`), and is a small boosted-tree classifier: a theme is several concepts firing together.
2. **The uncovered share.** A reference row is *uncovered* when r ≤ `density` (1/4). The headline is the share
   of reference rows so scored, with its interval by cluster, and — held out, since every score came from a
   model that did not see the row — the benchmark's density in that region relative to the reference's; the
   region is *confirmed* when that ratio is confidently below `region_ratio` (one-sided, by cluster).
3. **Themes.** The uncovered reference rows are grouped by the concept that carries them: greedily, the concept
   with the most pull on the uncovered rows not yet taken (rows × (1 − 1/lift), lift = how many times more
   often it fires there than on the benchmark's rows, at least twice), each theme holding the rows no theme
   before it holds. Themes are chosen on one half of the groups (`seed`) and measured on the other,
   where each is tested (H0: the benchmark's share of the theme's rows ≥ `region_ratio` × the reference's)
   and Benjamini–Hochberg runs over the themes at `fdr`: the FDR is controlled over what is reported. A theme
   holding most of the reference (≥ `FORMAT_SHARE`, two thirds) is the reference's own format (a sibling's template).

Activations only, never scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy import sparse, stats
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import StratifiedGroupKFold
from statsmodels.stats.multitest import multipletests
from threadpoolctl import threadpool_limits

from cg_ray.scope.clustered import GroupedShares, grouped_shares
from cg_ray.scope.reference import ScopeRule, excess_pvalues

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# A theme on this share of the reference is its format, not something it asks: on real text MATH's LaTeX against
# GSM8K held 74% of MATH's rows and BBQ's template 75% of BBQ + CrowS-Pairs (docs/results.md), under the 0.8 first
# used; a theme a builder would act on (a question form, a topic) was at most a fifth of its reference there.
FORMAT_SHARE = 2 / 3
MIN_THEME_ROWS = 5  # choosing-half reference rows a theme needs
MIN_LIFT = 2.0
SELECT_Z = 3.0  # a concept enters the density-ratio model at this excess z (training rows)
SELECT_MAX = 200  # a theme's concept fires ≥ this × as often on the uncovered rows as on the benchmark's


@dataclass(frozen=True)
class UncoveredRule:
    density: float = 0.25  # uncovered: the benchmark's density at most this × the reference's
    region_ratio: float = 0.5  # confirmed: the held-out density ratio confidently below this
    folds: int = 5
    seed: int = 0
    themes: int = 10  # at most this many themes
    fdr: float = 0.10  # Benjamini–Hochberg over the themes
    confidence: float = 0.95

    @classmethod
    def of(cls, rule: ScopeRule) -> UncoveredRule:
        """The row-level settings of a scope's rule."""
        return cls(rule.density, rule.region_ratio, rule.folds, rule.seed, rule.themes, rule.fdr, rule.confidence)


@dataclass(frozen=True)
class Share:
    """A share of one side's rows with its interval by cluster."""

    rows: int
    of: int
    share: float
    low: float
    high: float

    @classmethod
    def of_shares(cls, s: GroupedShares, confidence: float, column: int = 0) -> Share:
        low, high = s.interval(confidence)
        return cls(int(s.k[column]), s.n, float(s.share[column]), float(low[column]), float(high[column]))

    def as_dict(self) -> dict[str, float | int]:
        return {"rows": self.rows, "of": self.of, "share": self.share, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Contrast:
    """Reference and benchmark shares of one set of rows, their density ratio and its one-sided test."""

    reference: Share
    benchmark: Share
    ratio: float  # benchmark share / reference share (NaN when the reference share is 0)
    ratio_high: float  # conservative upper bound: the benchmark's upper end over the reference's lower end
    p_value: float  # H0: ratio ≥ region_ratio

    def as_dict(self) -> dict[str, object]:
        return {
            "reference": self.reference.as_dict(),
            "benchmark": self.benchmark.as_dict(),
            "ratio": _finite(self.ratio),
            "ratio_high": _finite(self.ratio_high),
            "p_value": self.p_value,
        }


@dataclass(frozen=True)
class RowTheme:
    """Uncovered reference rows carried by one concept, measured on the half that did not choose it."""

    concept: int
    members: tuple[int, ...]  # concepts firing on most of the same rows (the carrier first)
    contrast: Contrast  # on the measuring half
    q_value: float
    confirmed: bool
    kind: str  # "theme" or "format" (the reference's own template)
    reference_rows: tuple[int, ...]  # positions (in the rows read) of the theme's reference rows, both halves


@dataclass(frozen=True)
class RowCoverage:
    """The row-level view of one benchmark against one reference."""

    rule: UncoveredRule
    density_ratio: FloatArray  # per row read (NaN for rows on neither side): out-of-fold r(x)
    is_reference: BoolArray  # per row read: a reference row
    uncovered: Contrast  # the region r ≤ density: the headline
    confirmed: bool
    themes: list[RowTheme] = field(default_factory=list)
    concepts_used: list[int] = field(default_factory=list)  # per fold: concepts its model read
    fold_auc: float = float("nan")  # out-of-fold ROC AUC of benchmark vs reference

    @property
    def uncovered_share(self) -> Share:
        return self.uncovered.reference


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def contrast(
    in_set: BoolArray, is_ref: BoolArray, is_bench: BoolArray, groups: npt.NDArray[np.generic], rule: UncoveredRule
) -> Contrast:
    """Shares of `in_set` rows on each side (by cluster over `groups`) and the one-sided test of
    H0: bench share ≥ region_ratio × reference share, each side's variance floored as the excess test's."""
    r = grouped_shares(in_set[is_ref].astype(np.float64), groups[is_ref])
    b = grouped_shares(in_set[is_bench].astype(np.float64), groups[is_bench])
    m = rule.region_ratio
    target = m * r.share[0]
    floor_b = target * (1 - target) / (b.n_effective[0] if b.k[0] > 0 else float(b.n_groups))
    floor_r = r.share[0] * (1 - r.share[0]) / (r.n_effective[0] if r.k[0] > 0 else float(r.n_groups))
    se = float(np.sqrt(max(b.variance[0], floor_b) + m**2 * max(r.variance[0], floor_r)))
    diff = target - b.share[0]
    p = float(stats.norm.sf(diff / se)) if se > 0 else (0.0 if diff > 0 else 1.0)
    # two-sided intervals: each end holds at (1 + confidence) / 2, so the ratio of ends holds at `confidence`
    ref, bench = Share.of_shares(r, rule.confidence), Share.of_shares(b, rule.confidence)
    ratio = bench.share / ref.share if ref.share > 0 else float("nan")
    high = bench.high / ref.low if ref.low > 0 else float("inf")
    return Contrast(ref, bench, ratio, high, p)


def firing_indicators(matrix: sparse.csc_matrix, thresholds: FloatArray) -> sparse.csr_matrix:
    """Rows × concepts, 1 where the concept fires (the shared thresholds)."""
    col = np.repeat(np.arange(matrix.shape[1]), np.diff(matrix.indptr))
    keep = (matrix.data > 0) & (matrix.data >= thresholds[col])
    out = sparse.csc_matrix(
        (
            np.ones(int(keep.sum())),
            matrix.indices[keep],
            np.concatenate([[0], np.cumsum(np.bincount(col[keep], minlength=matrix.shape[1]))]),
        ),
        shape=matrix.shape,
    )
    return out.tocsr()


def _folds(y: IntArray, groups: npt.NDArray[np.generic], k: int, seed: int) -> list[tuple[IntArray, IntArray]]:
    n_groups = len(np.unique(groups))
    k = max(2, min(k, n_groups))
    splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    return [(np.asarray(a), np.asarray(b)) for a, b in splitter.split(np.zeros(y.size), y, groups)]


def _model() -> HistGradientBoostingClassifier:
    # Shallow boosted trees, fixed settings (docs/method.md: chosen on the planted themes, not tuned per run):
    # a theme is "several of these concepts fire together", an interaction an additive model cannot express
    # (a logistic regression on the same concepts put a third as many theme rows in the region).
    return HistGradientBoostingClassifier(
        max_iter=50, learning_rate=0.1, max_depth=3, min_samples_leaf=20, class_weight="balanced",
        early_stopping=False, random_state=0,
    )  # fmt: skip


def _ratio(model: HistGradientBoostingClassifier, x: npt.NDArray[np.float64]) -> FloatArray:
    p_ref = np.clip(model.predict_proba(x)[:, 1], 1e-9, 1 - 1e-9)
    return np.asarray((1 - p_ref) / p_ref, dtype=np.float64)  # balanced weights: the odds estimate the ratio


def excess_concepts(x: sparse.csr_matrix, y: IntArray, groups: npt.NDArray[np.generic]) -> IntArray:
    """The concepts the reference rows fire more often than the benchmark's, confidently (the excess test at
    margin 0, by cluster, z ≥ SELECT_Z), strongest first, at most SELECT_MAX. A density ratio fitted on every
    concept learns the noise of thousands of them and lets benchmark rows into the region; one fitted on
    these learns what the reference has and the benchmark lacks."""
    ref, bench = y == 1, y == 0
    rs = grouped_shares(x[np.flatnonzero(ref)], groups[ref])
    bs = grouped_shares(x[np.flatnonzero(bench)], groups[bench])
    p = excess_pvalues(bs, rs, np.ones(x.shape[1], dtype=bool), 0.0)
    z = stats.norm.isf(np.clip(p, 1e-300, 1.0))
    chosen = np.flatnonzero(z >= SELECT_Z)
    return np.asarray(chosen[np.argsort(-z[chosen])][:SELECT_MAX], dtype=np.int64)


def crossfit_density_ratio(
    x: sparse.csr_matrix, is_ref: BoolArray, groups: npt.NDArray[np.generic], rule: UncoveredRule
) -> tuple[FloatArray, list[IntArray]]:
    """Out-of-fold r(x) = p_bench / p_reference for every row of `x` (benchmark and reference rows only), and
    the concepts each fold's model used (chosen on its training rows)."""
    y = is_ref.astype(np.int64)
    ratio = np.ones(y.size)
    used: list[IntArray] = []
    for train, test in _folds(y, groups, rule.folds, rule.seed):
        cols = excess_concepts(x[train], y[train], groups[train])
        used.append(cols)
        if cols.size == 0:  # nothing the reference has more of: every held-out row is covered (r = 1)
            continue
        # One OpenMP thread: the models are small, and on a busy machine the trees' thread team spins for its
        # cores (measured here: 0.35 s a scope on one thread, 11 s with the default team beside other work).
        with threadpool_limits(limits=1, user_api="openmp"):
            model = _model().fit(x[train][:, cols].toarray(), y[train])
            ratio[test] = _ratio(model, x[test][:, cols].toarray())
    return ratio, used


def _auc(ratio: FloatArray, is_ref: BoolArray, is_bench: BoolArray) -> float:
    if not is_ref.any() or not is_bench.any():
        return float("nan")
    u = stats.mannwhitneyu(ratio[is_bench], ratio[is_ref], alternative="two-sided").statistic
    return float(u / (is_bench.sum() * is_ref.sum()))


def choose_themes(
    fired: sparse.csr_matrix, uncovered_ref: BoolArray, bench: BoolArray, limit: int
) -> list[tuple[int, tuple[int, ...]]]:
    """Greedy cover of the uncovered reference rows by concepts (on the rows given): each pick the concept
    firing on the most rows not yet taken among those with lift ≥ MIN_LIFT over the benchmark; its members
    are the concepts firing on at least half of the same rows with the same lift."""
    if not uncovered_ref.any():
        return []
    fc = fired.tocsc()
    region = fc[np.flatnonzero(uncovered_ref)]
    bench_share = np.asarray(fc[np.flatnonzero(bench)].mean(axis=0)).ravel() if bench.any() else np.zeros(fc.shape[1])
    region_share = np.asarray(region.mean(axis=0)).ravel()
    lift = region_share / np.maximum(bench_share, 1e-12)
    eligible = lift >= MIN_LIFT
    # a concept's pull: the rows it would take, discounted by how much of its firing the benchmark shares
    # (a generic latent that fires a little more often on the reference's longer texts takes many rows but
    # says little: 1 − 1/lift keeps it behind a specific one)
    specificity = np.where(eligible, 1.0 - 1.0 / np.maximum(lift, 1.0), 0.0)
    left = np.ones(region.shape[0], dtype=bool)
    picks: list[tuple[int, tuple[int, ...]]] = []
    for _ in range(limit):
        counts = np.asarray(region[left].sum(axis=0)).ravel()
        pull = counts * specificity * (counts >= MIN_THEME_ROWS)
        best = int(np.argmax(pull))
        if pull[best] <= 0:
            break
        rows = np.asarray(region[:, best].todense()).ravel() > 0
        taken = rows & left
        together = np.asarray(region[taken].sum(axis=0)).ravel()
        members = [best, *(int(c) for c in np.flatnonzero(eligible & (together >= 0.5 * taken.sum())) if c != best)]
        picks.append((best, tuple(members)))
        left &= ~rows
        specificity[best] = 0.0
        if not left.any():
            break
    return picks


def row_coverage(
    matrix: sparse.csc_matrix,
    thresholds: FloatArray,
    is_bench: BoolArray,
    is_ref: BoolArray,
    groups: Sequence[object] | npt.NDArray[np.generic],
    rule: UncoveredRule | None = None,
) -> RowCoverage:
    """The row-level view: rows × concepts s̃ of every row read, which rows are the benchmark's and the
    reference's (the rest are ignored), and each row's group (rows of one template share one)."""
    return coverage_of_fired(firing_indicators(matrix, thresholds), is_bench, is_ref, groups, rule)


def coverage_of_fired(
    fired: sparse.csr_matrix,
    is_bench: BoolArray,
    is_ref: BoolArray,
    groups: Sequence[object] | npt.NDArray[np.generic],
    rule: UncoveredRule | None = None,
) -> RowCoverage:
    """`row_coverage` on the rows × concepts firing indicators."""
    rule = rule or UncoveredRule()
    if (is_bench & is_ref).any():
        raise ValueError("a row is on both sides")
    g = np.asarray(groups)
    idx = np.flatnonzero(is_bench | is_ref)
    x = fired[idx]
    ref_u, bench_u, g_u = is_ref[idx], is_bench[idx], g[idx]
    ratio_u, used = crossfit_density_ratio(x, ref_u, g_u, rule)
    density_ratio = np.full(is_bench.size, np.nan)
    density_ratio[idx] = ratio_u
    region = ratio_u <= rule.density
    headline = contrast(region, ref_u, bench_u, g_u, rule)
    confirmed = headline.p_value <= 1.0 - rule.confidence
    themes = _themes(x, region, ref_u, bench_u, g_u, rule, idx) if confirmed else []
    n_used = [int(u.size) for u in used]
    auc = _auc(ratio_u, ref_u, bench_u)
    return RowCoverage(rule, density_ratio, is_ref, headline, confirmed, themes, n_used, auc)


def _themes(
    x: sparse.csr_matrix, region: BoolArray, ref: BoolArray, bench: BoolArray, g: npt.NDArray[np.generic],
    rule: UncoveredRule, positions: IntArray,
) -> list[RowTheme]:  # fmt: skip
    """Themes chosen on one half of the groups, tested on the other, BH over the themes tested."""
    codes = np.unique(g, return_inverse=True)[1]
    rng = np.random.default_rng([rule.seed, 57])
    choosing = (rng.permutation(int(codes.max()) + 1) % 2 == 0)[codes]
    picks = choose_themes(x, region & ref & choosing, bench & choosing, rule.themes)
    if not picks:
        return []
    measuring = ~choosing
    # each theme holds the rows its concept carries that no theme before it holds: themes are distinct sets of
    # rows, their shares add up to at most the uncovered share
    held = []
    taken = np.zeros(x.shape[0], dtype=bool)
    for concept, _ in picks:
        carries = np.asarray(x[:, concept].todense()).ravel() > 0
        held.append(carries & ~taken)
        taken |= carries & region
    contrasts = [contrast(region & h & measuring, ref & measuring, bench & measuring, g, rule) for h in held]
    q = multipletests([c.p_value for c in contrasts], method="fdr_bh")[1]
    themes = []
    for (concept, members), h, c, qv in zip(picks, held, contrasts, q, strict=True):
        kind = "format" if c.reference.share >= FORMAT_SHARE else "theme"
        rows = tuple(int(p) for p in positions[region & h & ref])
        themes.append(RowTheme(concept, members, c, float(qv), bool(qv <= rule.fdr), kind, rows))
    themes.sort(key=lambda t: (not t.confirmed, -t.contrast.reference.rows))
    return themes
