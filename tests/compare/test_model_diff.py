"""The maths of `cg-ray diff-models`: Newcombe's paired interval, and the hypotheses judged over repeated
splits on planted data (a planted concept is confirmed, noise is not, identical models give nothing)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from statsmodels.stats.proportion import confint_proportions_2indep

from cg_ray.compare.model_diff import (
    active_matrix,
    concept_stats,
    confirm,
    newcombe_paired,
    paired_test,
    rank_hypotheses,
    split_halves,
)
from cg_ray.profile.decision import GREATER, LESS


@pytest.mark.parametrize(
    ("both", "only_b", "only_a", "n"), [(4, 4, 4, 16), (2, 8, 2, 20), (0, 0, 0, 10), (2, 2, 3, 10), (1, 3, 1, 10)]
)
def test_uncorrelated_tables_give_the_independent_newcombe_interval(
    both: int, only_b: int, only_a: int, n: int
) -> None:
    neither = n - both - only_b - only_a
    assert both * neither - only_b * only_a <= n / 2  # φ* = 0
    delta, low, high = newcombe_paired(np.array([both]), np.array([only_b]), np.array([only_a]), n)
    want = confint_proportions_2indep(both + only_b, n, both + only_a, n, method="newcomb", compare="diff")
    assert delta[0] == pytest.approx((only_b - only_a) / n)
    np.testing.assert_allclose([low[0], high[0]], want, atol=1e-12)


def test_correlation_narrows_the_interval_and_it_covers_the_point() -> None:
    # Strongly concordant pairs: the same Δ with a narrower interval than if the two were independent.
    delta, low, high = newcombe_paired(np.array([30]), np.array([8]), np.array([2]), 80)
    indep = confint_proportions_2indep(38, 80, 32, 80, method="newcomb", compare="diff")
    assert low[0] < delta[0] < high[0]
    assert high[0] - low[0] < indep[1] - indep[0]


def test_coverage_is_near_nominal() -> None:
    rng = np.random.default_rng(0)
    n, sims = 60, 4000
    p_both, p_b, p_a = 0.2, 0.15, 0.05  # true Δ = 0.10
    cells = rng.multinomial(n, [p_both, p_b, p_a, 1 - p_both - p_b - p_a], size=sims)
    _, low, high = newcombe_paired(cells[:, 0], cells[:, 1], cells[:, 2], n)
    coverage = np.mean((low <= 0.10) & (high >= 0.10))
    assert 0.93 <= coverage <= 0.975


def test_agreeing_models_always_cover_zero() -> None:
    counts = np.arange(0, 41)
    delta, low, high = newcombe_paired(counts, np.zeros_like(counts), np.zeros_like(counts), 40)
    assert np.all(delta == 0) and np.all(low <= 0) and np.all(high >= 0)


def planted(n: int, d: int, seed: int, p_a: dict[int, float], p_b: dict[int, float], base: float = 0.3):
    rng = np.random.default_rng(seed)
    pa_ = np.full(d, base)
    pb_ = np.full(d, base)
    for c, p in p_a.items():
        pa_[c] = p
    for c, p in p_b.items():
        pb_[c] = p
    a = sparse.csr_matrix((rng.random((n, d)) < pa_).astype(np.float64))
    b = sparse.csr_matrix((rng.random((n, d)) < pb_).astype(np.float64))
    return a, b


def _confirmed(a, b, **kw) -> set[tuple[str, int]]:
    judged = confirm(a, b, seed=0, splits=10, fdr=0.1, confidence=0.95, min_rows=5, **kw).judged
    return {(d, c) for d, found in judged.items() for c, v in found if v.confirmed}


def test_a_planted_concept_is_confirmed_and_noise_is_not() -> None:
    a, b = planted(400, 60, seed=1, p_a={7: 0.6}, p_b={7: 0.2, 11: 0.55})  # 7: more in A, 11: more in B
    judged = confirm(a, b, seed=0, splits=10, fdr=0.1, confidence=0.95, min_rows=5, top=10)
    assert _confirmed(a, b, top=10) == {("a_more", 7), ("b_more", 11)}
    first = judged.judged["a_more"][0]
    assert first[0] == 7 and first[1].high is not None and first[1].high < 0 and first[1].splits_selected == 10
    counts = judged.counts()
    assert counts["confirmed"] == {"a_more": 1, "b_more": 1} and counts["splits"] == 10
    assert counts["formed"]["a_more"] >= 1 and counts["decision"].startswith("confirmed ⇔ q ≤ fdr")


def test_pure_noise_forms_hypotheses_that_are_seldom_confirmed() -> None:
    """400 concepts at the same rate in both models: every run forms hypotheses by chance (their intervals
    exclude 0 on a forming half), and the rule confirms something in at most 2 of seeds 0–19 (it allows 10%
    of seeds at fdr 0.1; 3 of 40 measured)."""
    formed = confirmed = 0
    for seed in range(20):
        a, b = planted(200, 400, seed=seed, p_a={}, p_b={})
        judged = confirm(a, b, seed=0, splits=10, fdr=0.1, confidence=0.95, min_rows=5, top=10)
        formed += sum(judged.counts()["formed"].values()) > 0
        confirmed += bool(_confirmed(a, b, top=10))
    assert formed == 20 and confirmed <= 2, (formed, confirmed)


@pytest.mark.parametrize(("share", "shift"), [(0.10, 0.08), (0.20, 0.10)])
def test_a_realistic_difference_is_confirmed_in_most_seeds(share: float, shift: float) -> None:
    """1,000 prompts, 200 concepts at 10–30% in both models' answers, drawn independently for A and B (no
    correlation within a prompt to help): one concept in `share` of A's answers and `share` + `shift` of B's
    is confirmed in at least 9 of 10 seeds (20 of 20 measured; at 10% → 15%, 11 of 20: its MDE), and
    something else in at most 1 (1 of 20 measured)."""
    hits = extra = 0
    for seed in range(10):
        rng = np.random.default_rng(100 + seed)
        rates = {c: float(rng.uniform(0.1, 0.3)) for c in range(200)}
        a, b = planted(1000, 200, seed=seed, p_a=rates | {5: share}, p_b=rates | {5: share + shift})
        found = _confirmed(a, b, top=10)
        hits += ("b_more", 5) in found
        extra += bool(found - {("b_more", 5)})
    assert hits >= 9 and extra <= 1, (hits, extra)


def test_identical_models_give_no_hypotheses() -> None:
    a, _ = planted(100, 30, seed=3, p_a={}, p_b={})
    judged = confirm(a, a.copy(), seed=0, splits=10, fdr=0.1, confidence=0.95, min_rows=1, top=10)
    assert all(len(v) == 0 for v in judged.judged.values())
    assert judged.counts()["confirmed"] == {"a_more": 0, "b_more": 0}
    stats = concept_stats(a, a.copy(), np.arange(100), 0.95)
    assert np.all(stats.delta == 0) and np.all(stats.low <= 0) and np.all(stats.high >= 0)


def test_the_paired_test_is_one_sided_and_never_certain() -> None:
    change = np.array([1.0] * 12 + [0.0] * 28)  # B's answer has it and A's not on 12 of 40 prompts
    more_in_b, more_in_a = paired_test(change, GREATER), paired_test(change, LESS)
    assert more_in_b.estimate == pytest.approx(0.3) and more_in_b.p_value < 0.001 < 0.999 < more_in_a.p_value
    every = paired_test(np.ones(40), GREATER)  # every prompt differs the same way: no variance, floored
    assert every.testable and 0 < every.p_value < 1e-6
    assert not paired_test(np.ones(4), GREATER).testable  # fewer than 5 prompts: no test


def test_ranking_rule_and_min_rows() -> None:
    a, b = planted(300, 20, seed=4, p_a={1: 0.7, 2: 0.5}, p_b={1: 0.1, 2: 0.3})
    stats = concept_stats(a, b, np.arange(300), 0.95)
    ranked = rank_hypotheses(stats, min_rows=5, top=10)
    assert ranked["a_more"][:2].tolist() == [1, 2]  # the larger, surer difference first
    assert np.all(np.diff(stats.high[ranked["a_more"]]) >= 0)
    strict = rank_hypotheses(stats, min_rows=1000, top=10)
    assert all(len(v) == 0 for v in strict.values())


def test_split_halves_is_a_seeded_partition() -> None:
    d1, h1 = split_halves(11, 5)
    d2, h2 = split_halves(11, 5)
    assert np.array_equal(d1, d2) and np.array_equal(h1, h2)
    assert sorted([*d1.tolist(), *h1.tolist()]) == list(range(11)) and len(d1) == 6


def test_active_matrix_applies_the_threshold() -> None:
    ids = [np.array([0, 3], np.int32), np.array([], np.int32), np.array([3], np.int32)]
    acts = [np.array([0.5, 0.05], np.float32), np.array([], np.float32), np.array([2.0], np.float32)]
    m = active_matrix(ids, acts, 5, threshold=0.1)
    assert m.shape == (3, 5)
    assert m.toarray().tolist() == [[0.5, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 2.0, 0]]
