"""The metrics engine against a brute-force dense implementation of docs/method.md,
and its invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cg_ray.config import MetricsConfig
from cg_ray.metrics.accumulator import CGAccumulator
from cg_ray.metrics.compute import compute_metrics, coverage_classes


def dense_to_csr(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols = np.nonzero(dense)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))])
    return offsets, cols.astype(np.int32), dense[rows, cols].astype(np.float32)


def accumulate(dense: np.ndarray, bench: np.ndarray, scores: np.ndarray, names: list[str]) -> CGAccumulator:
    acc = CGAccumulator(dense.shape[1])
    offsets, ids, acts = dense_to_csr(dense)
    acc.add_batch(bench, names, scores, offsets, ids, acts)
    return acc


def brute_force(dense: np.ndarray, bench: np.ndarray, scores: np.ndarray, n_bench: int) -> dict[str, np.ndarray]:
    """The paper's formulas written out term by term, one benchmark and concept at a time."""
    d = dense.shape[1]
    s = dense.astype(np.float32).astype(np.float64)  # the engine stores s̃ as float32
    chi_b = np.zeros((n_bench, d))
    chi_m = np.full((n_bench, d), np.nan)
    for b in range(n_bench):
        rows = np.flatnonzero(bench == b)
        total = sum(s[i, c] for i in rows for c in range(d))
        for c in range(d):
            col = sum(s[i, c] for i in rows)
            chi_b[b, c] = col / (total / d) if total > 0 else 0.0
            scored = [i for i in rows if not np.isnan(scores[i])]
            denom = sum(s[i, c] for i in scored)
            if denom > 0:
                chi_m[b, c] = sum(scores[i] * s[i, c] for i in scored) / denom
    x_bench = chi_b.sum(axis=0) / n_bench
    x_model = np.full(d, np.nan)
    for c in range(d):
        defined = [chi_m[b, c] for b in range(n_bench) if not np.isnan(chi_m[b, c])]
        if defined:
            x_model[c] = sum(defined) / len(defined)
    return {"chi_bench": chi_b, "chi_model": chi_m, "X_bench": x_bench, "X_model": x_model}


@st.composite
def suites(draw):
    n_bench = draw(st.integers(1, 4))
    d = draw(st.integers(1, 12))
    n_rows = draw(st.integers(n_bench, 25))
    bench = np.array(
        list(range(n_bench))
        + draw(st.lists(st.integers(0, n_bench - 1), min_size=n_rows - n_bench, max_size=n_rows - n_bench))
    )
    vals = st.one_of(st.just(0.0), st.floats(1e-3, 50.0, allow_nan=False))
    dense = np.array(draw(st.lists(vals, min_size=n_rows * d, max_size=n_rows * d))).reshape(n_rows, d)
    score = st.one_of(st.none(), st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0]))
    scores = np.array([np.nan if x is None else x for x in draw(st.lists(score, min_size=n_rows, max_size=n_rows))])
    return dense, bench, scores, n_bench


@settings(max_examples=150, deadline=None)
@given(suites())
def test_engine_matches_brute_force(suite) -> None:
    dense, bench, scores, n_bench = suite
    names = [f"b{i}" for i in range(n_bench)]
    result = compute_metrics(accumulate(dense, bench, scores, names))
    ref = brute_force(dense, bench, scores, n_bench)
    assert result.benchmarks == names
    for key in ("chi_bench", "chi_model", "X_bench", "X_model"):
        np.testing.assert_allclose(getattr(result, key), ref[key], rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=key)
    # Undefined means undefined: NaN exactly where no scored row activates the concept.
    assert np.array_equal(np.isnan(result.chi_model), np.isnan(ref["chi_model"]))


@settings(max_examples=100, deadline=None)
@given(suites())
def test_invariants(suite) -> None:
    dense, bench, scores, n_bench = suite
    names = [f"b{i}" for i in range(n_bench)]
    result = compute_metrics(accumulate(dense, bench, scores, names))
    # Mean χ_bench over all concepts is exactly 1 for every benchmark that activates anything.
    active = result.act_sum.sum(axis=1) > 0
    np.testing.assert_allclose(result.chi_bench[active].mean(axis=1), 1.0, rtol=1e-12)

    # Permuting rows changes nothing.
    perm = np.random.default_rng(0).permutation(len(bench))
    permuted = compute_metrics(accumulate(dense[perm], bench[perm], scores[perm], names))
    for key in ("chi_bench", "chi_model", "X_bench", "X_model"):
        np.testing.assert_allclose(getattr(permuted, key), getattr(result, key), rtol=1e-9, equal_nan=True)

    # Merging the accumulators of two halves equals one pass.
    half = len(bench) // 2
    a = accumulate(dense[:half], bench[:half], scores[:half], names)
    b = accumulate(dense[half:], bench[half:], scores[half:], names)
    merged = compute_metrics(a.merge(b))
    for key in ("chi_bench", "chi_model", "X_bench", "X_model", "n_active_rows"):
        np.testing.assert_allclose(getattr(merged, key), getattr(result, key), rtol=1e-9, equal_nan=True)


@settings(max_examples=60, deadline=None)
@given(suites(), st.floats(0.0, 1.0))
def test_constant_score_gives_that_score_everywhere(suite, m) -> None:
    dense, bench, _, n_bench = suite
    result = compute_metrics(accumulate(dense, bench, np.full(len(bench), m), [f"b{i}" for i in range(n_bench)]))
    defined = ~np.isnan(result.chi_model)
    np.testing.assert_allclose(result.chi_model[defined], m, rtol=1e-12, atol=1e-15)
    assert np.array_equal(defined, result.act_sum > 0)
    np.testing.assert_allclose(result.X_model[~np.isnan(result.X_model)], m, rtol=1e-12, atol=1e-15)


def test_coverage_classes_follow_the_paper() -> None:
    values = np.array([0.0, 5e-6, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    classes, thresholds = coverage_classes(values, 1e-5, 10, 90)
    present = values[2:]
    assert thresholds.low == pytest.approx(np.percentile(present, 10))
    assert thresholds.high == pytest.approx(np.percentile(present, 90))
    names = np.array(["missing", "under", "normal", "over"])[classes]
    assert list(names[:2]) == ["missing", "missing"]  # below ε, including a tiny positive value
    assert names[2] == "under" and names[-1] == "over"
    assert set(names[4:-1]) == {"normal"}


def test_active_only_mean_and_model_gaps() -> None:
    # Concept 0 active in benchmark a only, always failed; concept 1 active in both, always passed.
    dense = np.array([[1.0, 1.0], [0.0, 2.0]])
    bench = np.array([0, 1])
    scores = np.array([0.0, 1.0])
    acc = accumulate(dense, bench, scores, ["a", "b"])
    all_mean = compute_metrics(acc, MetricsConfig())
    active_mean = compute_metrics(acc, MetricsConfig(coverage_mean="active"))
    # χ_bench(a) = [1, 1]; χ_bench(b) = [0, 2].
    np.testing.assert_allclose(all_mean.X_bench, [0.5, 1.5])
    np.testing.assert_allclose(active_mean.X_bench, [1.0, 1.5])
    np.testing.assert_allclose(all_mean.chi_model, [[0.0, 0.0], [np.nan, 1.0]])
    np.testing.assert_allclose(all_mean.X_model, [0.0, 0.5])
    assert list(all_mean.is_model_gap) == [True, False]


def test_unscored_rows_count_for_coverage_only() -> None:
    dense = np.array([[1.0, 0.0], [0.0, 4.0]])
    acc = accumulate(dense, np.array([0, 0]), np.array([1.0, np.nan]), ["a"])
    result = compute_metrics(acc)
    np.testing.assert_allclose(result.chi_bench, [[0.4, 1.6]])
    assert result.chi_model[0, 0] == 1.0 and np.isnan(result.chi_model[0, 1])
    assert result.n_scored_rows.tolist() == [1]


def test_empty_accumulator_is_an_error() -> None:
    with pytest.raises(ValueError, match="no rows"):
        compute_metrics(CGAccumulator(4))
