"""The vectorised paired bootstrap: equal to re-running the metrics per resample, antisymmetric in A and B,
and its quantiles equal numpy's."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from cg_ray.compare.bootstrap import PairedSample, _Weights, column_quantiles, paired_bootstrap
from cg_ray.metrics.compute import compute_metrics
from cg_ray.metrics.robustness import RowTable


def random_sample(seed: int, n: int = 120, k: int = 10, n_bench: int = 2, same_acts: bool = False) -> PairedSample:
    rng = np.random.default_rng(seed)

    def acts() -> sparse.csr_matrix:
        dense = rng.uniform(0.1, 2.0, (n, k)) * (rng.random((n, k)) < 0.3)
        return sparse.csr_matrix(dense)

    a = acts()
    return PairedSample(
        acts_a=a,
        acts_b=a if same_acts else acts(),
        scores_a=(rng.random(n) < 0.6).astype(float),
        scores_b=rng.random(n),  # graded scores in [0, 1]
        codes=rng.integers(0, n_bench, n),
        n_benchmarks=n_bench,
    )


def naive_x_model(acts: sparse.csr_matrix, scores: np.ndarray, codes: np.ndarray, n_bench: int, counts: np.ndarray):
    """X_model by the project's metrics (RowTable + compute_metrics) on the rows repeated `counts` times."""
    rows = np.repeat(np.arange(acts.shape[0]), counts.astype(np.int64))
    table = RowTable(
        d_sae=acts.shape[1],
        benchmark_names=[f"b{i}" for i in range(n_bench)],
        benchmark_codes=codes.astype(np.int32),
        scores=scores,
        offsets=acts.indptr.astype(np.int64),
        concept_ids=acts.indices.astype(np.int32),
        concept_acts=acts.data.astype(np.float32),
    )
    return compute_metrics(table.accumulate(rows)).X_model


def test_vectorised_resamples_equal_recomputing_the_metrics_per_resample() -> None:
    sample = random_sample(3)
    resamples, seed = 40, 7
    fast = paired_bootstrap(sample, resamples=resamples, seed=seed)
    weights = _Weights(sample, resamples, seed, max_cells=10**9)
    deltas = []
    for r in range(resamples + 1):
        counts = np.zeros(sample.codes.size)
        for b, rows in enumerate(weights.rows):
            counts[rows] = weights[b][r]
        x = [
            naive_x_model(acts, scores, sample.codes, sample.n_benchmarks, counts)
            for acts, scores in ((sample.acts_a, sample.scores_a), (sample.acts_b, sample.scores_b))
        ]
        deltas.append(x[1] - x[0])
    # float32 activations in the metrics path: equal to ~1e-6
    np.testing.assert_allclose(fast.x_delta, deltas[0], atol=1e-5)
    low, high = np.nanquantile(np.array(deltas[1:]), [0.025, 0.975], axis=0)
    np.testing.assert_allclose(fast.x_low, low, atol=1e-5)
    np.testing.assert_allclose(fast.x_high, high, atol=1e-5)


def test_chunking_over_concepts_does_not_change_the_result() -> None:
    sample = random_sample(5)
    whole = paired_bootstrap(sample, resamples=50, seed=2)
    chunked = paired_bootstrap(sample, resamples=50, seed=2, max_cells=51 * 2 * 3)  # 3 concepts per chunk
    for name in ("x_delta", "x_low", "x_high", "chi_low", "rel_low", "rel_high"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(chunked, name))


def test_the_seed_makes_it_reproducible() -> None:
    sample = random_sample(1)
    one, two = paired_bootstrap(sample, resamples=30, seed=4), paired_bootstrap(sample, resamples=30, seed=4)
    np.testing.assert_array_equal(one.x_low, two.x_low)
    assert not np.array_equal(one.x_low, paired_bootstrap(sample, resamples=30, seed=5).x_low)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_bench=st.integers(1, 3), same_acts=st.booleans())
def test_swapping_a_and_b_negates_every_delta_and_mirrors_its_interval(
    seed: int, n_bench: int, same_acts: bool
) -> None:
    ab = random_sample(seed, n=60, k=6, n_bench=n_bench, same_acts=same_acts)
    ba = PairedSample(ab.acts_b, ab.acts_a, ab.scores_b, ab.scores_a, ab.codes, ab.n_benchmarks)
    fwd, back = paired_bootstrap(ab, resamples=40, seed=seed), paired_bootstrap(ba, resamples=40, seed=seed)
    for value, low, high in (("x_delta", "x_low", "x_high"), ("rel_delta", "rel_low", "rel_high")):
        np.testing.assert_allclose(getattr(back, value), -getattr(fwd, value), atol=1e-12)
        np.testing.assert_allclose(getattr(back, low), -getattr(fwd, high), atol=1e-12)
        np.testing.assert_allclose(getattr(back, high), -getattr(fwd, low), atol=1e-12)
    np.testing.assert_allclose(back.chi_delta, -fwd.chi_delta, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rows=st.integers(1, 30),
    nan_fraction=st.floats(0.0, 1.0),
    q=st.floats(0.0, 1.0),
)
def test_column_quantiles_equal_numpy_nanquantile(seed: int, rows: int, nan_fraction: float, q: float) -> None:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(rows, 5))
    values[rng.random(values.shape) < nan_fraction] = np.nan
    ours = column_quantiles(values, (q,))[0]
    defined = ~np.isnan(values).all(axis=0)
    expected = np.full(5, np.nan)
    if defined.any():
        expected[defined] = np.nanquantile(values[:, defined], q, axis=0)
    np.testing.assert_allclose(ours, expected, atol=1e-12)
