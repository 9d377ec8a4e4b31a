"""The reference method's rates, for both rules (`excess`, the default, and `ratio`, the rule before): a null
gives no gap at the stated rate, a real gap is found, and a missing concept's bound is exact. Rows in
templates: tests/scope/test_clustered.py."""

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
    rule = ScopeRule(method="ratio", fdr=0.10)
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
    rule = ScopeRule(method="ratio", ratio=0.5, min_share=0.02)
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


@pytest.mark.parametrize("method", ["excess", "ratio"])
def test_a_concept_the_benchmark_leaves_out_is_found_and_the_rest_are_not(method: str) -> None:
    rule = ScopeRule(method=method)  # type: ignore[arg-type]
    rng = np.random.default_rng(2)
    d, n_b, n_r = 300, 1000, 1000
    p = _rates(rng, d)
    p_b = p.copy()
    left_out = [5, 17, 42]
    p[left_out] = 0.06  # used by the reference on 6% of its rows ...
    p_b[left_out] = 0.0  # ... and never by the benchmark
    found = []
    for _ in range(50):
        res = compare(rng.binomial(n_b, p_b), n_b, rng.binomial(n_r, p), n_r, rule)
        found.append(set(res.gaps["concept"].tolist()))
    assert all(set(left_out) <= f for f in found)  # each real gap, every time
    false = np.mean([len(f - set(left_out)) for f in found])
    assert false <= 0.5  # and almost nothing else (all other concepts are nulls)
    one = compare(np.zeros(d, dtype=np.int64), n_b, rng.binomial(n_r, p), n_r, rule)
    row = one.table.loc[left_out[0]]
    assert row["missing"] and row["bench_high"] == pytest.approx(float(1 - 0.025 ** (1 / n_b)), rel=1e-6)
    assert row["ratio_high"] < 0.5  # the interval of the ratio says "less than half as often"


def test_a_concept_rare_in_the_reference_is_not_in_scope_however_absent_from_the_benchmark() -> None:
    kb = np.array([0, 0])
    kr = np.array([3, 60])  # 0.3% and 6% of 1,000 reference rows
    res = compare(kb, 2000, kr, 1000, ScopeRule(method="ratio"))
    assert res.table["in_reference"].tolist() == [False, True]
    assert res.table["gap"].tolist() == [False, True]
    assert np.isnan(res.table.loc[0, "q_value"])  # not in the family: BH is not spent on it


def test_the_excess_rule_at_its_null_holds_its_level_and_a_complete_null_finds_nothing() -> None:
    """Excess rule. At its boundary (p_R − p_b exactly `margin` for every concept) the per-concept test rejects
    at most at its level; with both sides drawn from one population (the complete null) a replication shows
    any gap at most at fdr's rate."""
    rng = np.random.default_rng(3)
    rule = ScopeRule()  # excess, margin 0.02
    n_b, n_r, d = 800, 1200, 150
    rejected = total = any_gap = in_use = 0
    for _ in range(REPLICATIONS):
        p_b = rng.uniform(0.01, 0.3, size=d)
        res = compare(rng.binomial(n_b, p_b), n_b, rng.binomial(n_r, p_b + rule.margin), n_r, rule)
        tested = res.table[res.table["in_reference"]]
        rejected += int((tested["p_value"] <= 0.05).sum())
        total += len(tested)
        p = _rates(rng, 400)
        same = compare(rng.binomial(n_b, p), n_b, rng.binomial(n_r, p), n_r, rule)
        any_gap += int(same.table["gap"].any())
        in_use += same.n_in_reference
    assert total > 0.9 * REPLICATIONS * d and in_use / REPLICATIONS > 50  # the families are not empty
    assert rejected / total <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / total)
    assert any_gap / REPLICATIONS <= stats.binom.ppf(0.999, REPLICATIONS, rule.fdr) / REPLICATIONS


def test_the_excess_rule_finds_a_theme_latent_with_a_background_that_the_ratio_rule_cannot() -> None:
    """The case that made the excess rule (issue #57): a question form on 15% of the reference fires its latent
    on 58% of those rows and on 7% of every other row; the benchmark never asks it. The ratio p_b / p_R is
    0.47 — never confidently below 0.5 — while the excess is 8 points of rows."""
    rng = np.random.default_rng(4)
    n, d = 1000, 300
    found = {"excess": 0, "ratio": 0}
    for _ in range(50):
        p = _rates(rng, d)
        p_r, p_b = p.copy(), p.copy()
        p_r[7] = 0.156 * 0.58 + 0.844 * 0.07
        p_b[7] = 0.07
        kb, kr = rng.binomial(n, p_b), rng.binomial(n, p_r)
        for method in found:
            res = compare(kb, n, kr, n, ScopeRule(method=method))  # type: ignore[arg-type]
            found[method] += int(7 in set(res.gaps["concept"].tolist()))
    # One latent, 1,000 rows a side, BH over ~150 concepts in use: measured 38 of 50 (the ratio rule: 0).
    assert found["excess"] >= 33
    assert found["ratio"] <= 5
