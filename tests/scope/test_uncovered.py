"""The row-level view of coverage (cg_ray/scope/uncovered.py) on synthetic firing rows where every concept
also fires on a background of other rows, as a real reader's do: a planted theme is found as one theme
of mostly its rows, the null confirms nothing, and no row is scored by a model that saw its template."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from cg_ray.scope.uncovered import UncoveredRule, coverage_of_fired, crossfit_density_ratio

D = 120
THEME = [0, 1, 2, 3]  # the theme's latents: 60% on its rows, and a 5% background everywhere


def rows(rng: np.random.Generator, n: int, theme: np.ndarray) -> sparse.csr_matrix:
    base = rng.random((n, D)) < 0.06
    base[:, THEME] = rng.random((n, len(THEME))) < 0.05
    base[np.ix_(theme, THEME)] |= rng.random((int(theme.sum()), len(THEME))) < 0.6
    return sparse.csr_matrix(base.astype(np.float64))


def suite(rng: np.random.Generator, n: int, share: float, per_group: int = 1):
    """Benchmark (no theme) then reference (theme on `share` of its rows); groups of `per_group` rows."""
    theme_ref = np.zeros(n, bool)
    theme_ref[: round(share * n)] = True
    x = sparse.vstack([rows(rng, n, np.zeros(n, bool)), rows(rng, n, theme_ref)]).tocsr()
    is_ref = np.r_[np.zeros(n, bool), np.ones(n, bool)]
    truth = np.r_[np.zeros(n, bool), theme_ref]
    groups = np.arange(2 * n) // per_group
    return x, ~is_ref, is_ref, groups, truth


def test_a_planted_theme_with_a_background_is_found_as_one_theme_of_its_rows() -> None:
    rng = np.random.default_rng(0)
    x, is_bench, is_ref, groups, truth = suite(rng, 600, 0.12)
    cov = coverage_of_fired(x, is_bench, is_ref, groups)
    assert cov.confirmed
    confirmed = [t for t in cov.themes if t.confirmed]
    assert confirmed and confirmed[0].concept in THEME
    # the theme's reference rows are mostly planted rows, and most planted rows are in the region
    assert truth[list(confirmed[0].reference_rows)].mean() >= 0.8
    region = cov.density_ratio <= cov.rule.density
    # Only a planted row firing ≥ 3 of the 4 theme latents is truly uncovered (with 2 its density ratio is
    # 1 / (0.88 + 0.12 × 25.5) ≈ 0.25): 48% of them. The region holds most of those (measured: 0.44 of all).
    assert region[truth].mean() >= 0.35
    assert cov.uncovered.ratio < 0.5 and cov.uncovered.reference.low > 0.03
    assert cov.fold_auc > 0.5  # benchmark rows get the higher density ratio: P(r(bench row) > r(reference row))


def test_the_null_confirms_no_region() -> None:
    """Both sides drawn alike: over 30 replications a confirmed region is at most as rare as its level allows
    (one-sided 5%; the binomial band at 30 replications allows 5)."""
    rng = np.random.default_rng(1)
    confirmed = 0
    for _ in range(30):
        x, is_bench, is_ref, groups, _ = suite(rng, 300, 0.0)
        confirmed += int(coverage_of_fired(x, is_bench, is_ref, groups).confirmed)
    assert confirmed <= 5


def test_no_row_is_scored_by_a_model_that_saw_its_template() -> None:
    """Templates whose rows are identical and each on one side: a model that saw a template would score its
    rows perfectly. Cross-fitted by group, a held-out template's rows carry no information about its side,
    so the out-of-fold density ratio cannot separate the sides."""
    rng = np.random.default_rng(2)
    templates, per = 120, 8
    t = (rng.random((templates, D)) < 0.08).astype(np.float64)
    x = sparse.csr_matrix(np.repeat(t, per, axis=0))
    side = np.repeat(np.arange(templates) % 2 == 0, per)
    groups = np.repeat(np.arange(templates), per)
    ratio, _ = crossfit_density_ratio(x, side, groups, UncoveredRule())
    from scipy import stats

    auc = stats.mannwhitneyu(ratio[~side], ratio[side]).statistic / (side.sum() * (~side).sum())
    assert 0.35 < auc < 0.65
    ungrouped, _ = crossfit_density_ratio(x, side, np.arange(side.size), UncoveredRule())
    leaky = stats.mannwhitneyu(ungrouped[~side], ungrouped[side]).statistic / (side.sum() * (~side).sum())
    assert leaky > 0.75  # the same data split by row looks separable (measured: 0.83)


def test_rows_on_both_sides_are_refused() -> None:
    x = sparse.csr_matrix(np.eye(4))
    with pytest.raises(ValueError, match="both sides"):
        coverage_of_fired(x, np.array([1, 1, 0, 0], bool), np.array([0, 1, 1, 1], bool), np.arange(4))


def test_a_sibling_template_on_three_quarters_of_the_reference_is_its_format_and_a_fifth_is_a_theme() -> None:
    """MATH's LaTeX against GSM8K held 74% of MATH's rows, BBQ's template 75% of BBQ + CrowS-Pairs (real text,
    docs/results.md): a template that is most, but not all, of the reference is its format, which a builder
    reads past; a theme of a fifth of it is something it asks."""
    rng = np.random.default_rng(3)
    n = 600
    template, theme = [10, 11, 12], [20, 21, 22]  # latents the benchmark never fires
    x = (rng.random((2 * n, D)) < 0.06).astype(np.float64)
    x[:, template + theme] = 0.0
    ref = np.r_[np.zeros(n, bool), np.ones(n, bool)]
    in_template = ref & (rng.random(2 * n) < 0.75)
    in_theme = ref & ~in_template & (rng.random(2 * n) < 0.8)
    x[np.ix_(in_template, template)] = 1.0
    x[np.ix_(in_theme, theme)] = 1.0
    cov = coverage_of_fired(sparse.csr_matrix(x), ~ref, ref, np.arange(2 * n))
    kinds = {t.concept: t.kind for t in cov.themes if t.confirmed}
    assert {kinds.get(c) for c in template} & {"format"}, kinds
    assert {kinds.get(c) for c in theme} & {"theme"}, kinds
