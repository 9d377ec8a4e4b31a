"""The reference method's rates: a null gives no gap at the stated rate, a real gap is found, and a
missing concept's bound is exact."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from cg_ray.scope.reference import ScopeRule, compare, missing_bound

REPLICATIONS = 400


def _rates(rng: np.random.Generator, d: int) -> np.ndarray:
    # Shares like a real dictionary's: most concepts rare, some common, many near the in-use line (2%).
    return np.clip(rng.lognormal(np.log(0.02), 1.2, size=d), 0.0, 0.6)


def test_missing_bound_is_the_exact_one_sided_bound() -> None:
    for n in (20, 200, 20_000):
        bound = float(missing_bound(n, 0.95))
        # Seeing 0 of n has probability exactly 5% at the bound: (1 - bound)^n = 0.05.
        assert stats.binom.pmf(0, n, bound) == pytest.approx(0.05, rel=1e-9)
    assert float(missing_bound(200)) == pytest.approx(0.0149, abs=1e-4)
    assert float(missing_bound(20_000)) == pytest.approx(0.00015, abs=1e-5)


def test_a_null_gives_no_gap_at_the_stated_rate() -> None:
    """The hardest null: every concept's benchmark share exactly `ratio` (0.5) × the reference's, so no
    concept is a gap and a replication showing any is a false claim. Over 400 replications the rate of any
    false gap must stay within a binomial band of fdr (under the full null BH's FDR is exactly this rate;
    measured: 5.3% at fdr 10%)."""
    rng = np.random.default_rng(0)
    rule = ScopeRule(fdr=0.10)
    d, n_b, n_r = 400, 800, 1200
    any_gap = 0
    tested = []
    for _ in range(REPLICATIONS):
        p = _rates(rng, d)
        kb, kr = rng.binomial(n_b, rule.ratio * p), rng.binomial(n_r, p)
        res = compare(kb, n_b, kr, n_r, rule)
        any_gap += int(res.table["gap"].any())
        tested.append(res.n_in_reference)
    # The family is not empty (the test would pass vacuously): about a third of the concepts are in use.
    assert np.mean(tested) > 50
    upper = stats.binom.ppf(0.999, REPLICATIONS, rule.fdr) / REPLICATIONS
    assert any_gap / REPLICATIONS <= upper


def test_at_the_ratio_boundary_the_test_holds_its_level() -> None:
    """The worst null: every concept's benchmark share exactly `ratio` × the reference's. Per concept the
    one-sided p-value must reject at most at its level (checked at 5% over 400 × 150 concept tests)."""
    rng = np.random.default_rng(1)
    rule = ScopeRule(ratio=0.5, min_share=0.02)
    n_b, n_r = 600, 1500
    rejected = total = 0
    for _ in range(REPLICATIONS):
        p_r = rng.uniform(0.04, 0.3, size=150)
        res = compare(rng.binomial(n_b, 0.5 * p_r), n_b, rng.binomial(n_r, p_r), n_r, rule)
        tested = res.table[res.table["in_reference"]]
        rejected += int((tested["p_value"] <= 0.05).sum())
        total += len(tested)
    assert total > 0.9 * REPLICATIONS * 150
    # The score test is asymptotic; allow the binomial band around 5% plus 1 point for its approximation.
    assert rejected / total <= 0.06 + 3 * np.sqrt(0.05 * 0.95 / total)


def test_a_concept_the_benchmark_leaves_out_is_found_and_the_rest_are_not() -> None:
    rng = np.random.default_rng(2)
    d, n_b, n_r = 300, 1000, 1000
    p = _rates(rng, d)
    p_b = p.copy()
    left_out = [5, 17, 42]
    p[left_out] = 0.06  # used by the reference on 6% of its rows ...
    p_b[left_out] = 0.0  # ... and never by the benchmark
    found = []
    for _ in range(50):
        res = compare(rng.binomial(n_b, p_b), n_b, rng.binomial(n_r, p), n_r)
        found.append(set(res.gaps["concept"].tolist()))
    assert all(set(left_out) <= f for f in found)  # each real gap, every time
    false = np.mean([len(f - set(left_out)) for f in found])
    assert false <= 0.5  # and almost nothing else (all other concepts are nulls)
    one = compare(np.zeros(d, dtype=np.int64), n_b, rng.binomial(n_r, p), n_r)
    row = one.table.loc[left_out[0]]
    assert row["missing"] and row["bench_high"] == pytest.approx(float(1 - 0.025 ** (1 / n_b)), rel=1e-6)
    assert row["ratio_high"] < 0.5  # the interval of the ratio says "less than half as often"


def test_a_concept_rare_in_the_reference_is_not_in_scope_however_absent_from_the_benchmark() -> None:
    kb = np.array([0, 0])
    kr = np.array([3, 60])  # 0.3% and 6% of 1,000 reference rows
    res = compare(kb, 2000, kr, 1000)
    assert res.table["in_reference"].tolist() == [False, True]
    assert res.table["gap"].tolist() == [False, True]
    assert np.isnan(res.table.loc[0, "q_value"])  # not in the family: BH is not spent on it
