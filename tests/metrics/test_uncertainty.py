"""Σ s̃² and effective support, interval coverage on planted truth, and the difficulty-adjusted gap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cg_ray.artifacts.rows import accumulate_rows, load_row_table, open_rows
from cg_ray.config import MetricsConfig
from cg_ray.metrics.accumulator import CGAccumulator
from cg_ray.metrics.compute import compute_metrics
from cg_ray.metrics.robustness import subtract
from cg_ray.metrics.uncertainty import effective_support, wilson_interval
from cg_ray.synthetic import SyntheticPlan, SyntheticSpec, iter_synthetic_batches, write_synthetic_rows

# slow ones here are numbers only: they run beside other tests (Makefile, pytest-all)
pytestmark = pytest.mark.cpu_only

PLANTED_MIN_ROWS = 20  # the default ranking filter: the concepts a profile can report


def _batch_arrays(batch: pa.RecordBatch) -> tuple:
    ids = batch.column("concept_ids")
    acts = batch.column("concept_acts")
    bench = batch.column("benchmark").to_pylist()
    names = sorted(set(bench))
    codes = np.array([names.index(b) for b in bench])
    scores = batch.column("score").to_numpy(zero_copy_only=False).astype(np.float64)
    return codes, names, scores, ids.offsets.to_numpy(), ids.values.to_numpy(), acts.values.to_numpy()


def test_squared_sums_are_exact_additive_and_mergeable() -> None:
    spec = SyntheticSpec(benchmarks=("a", "b"), rows_per_benchmark=300, d_sae=64, nnz=8, seed=3, chunk_rows=100)
    whole = CGAccumulator(spec.d_sae)
    parts = []
    brute = {"a": np.zeros(spec.d_sae), "b": np.zeros(spec.d_sae)}
    for batch in iter_synthetic_batches(spec):
        codes, names, scores, offsets, ids, acts = _batch_arrays(batch)
        scores[::7] = np.nan  # unscored rows count for coverage only, never in Σ s̃²
        part = CGAccumulator(spec.d_sae)
        part.add_batch(codes, names, scores, offsets, ids, acts)
        whole.add_batch(codes, names, scores, offsets, ids, acts)
        parts.append(part)
        for r in range(len(scores)):
            if np.isnan(scores[r]):
                continue
            sl = slice(offsets[r], offsets[r + 1])
            brute[names[codes[r]]][ids[sl]] += acts[sl].astype(np.float64) ** 2
    merged = CGAccumulator.merged(parts, spec.d_sae)
    for name in ("a", "b"):
        np.testing.assert_allclose(whole.benchmarks[name].scored_act_sq_sum, brute[name], rtol=1e-12)
        np.testing.assert_allclose(merged.benchmarks[name].scored_act_sq_sum, brute[name], rtol=1e-12)
        copy = merged.benchmarks[name].copy()
        assert copy.scored_act_sq_sum is not merged.benchmarks[name].scored_act_sq_sum
        np.testing.assert_array_equal(copy.scored_act_sq_sum, merged.benchmarks[name].scored_act_sq_sum)
    _, stacked = merged.stacked()
    assert stacked["scored_act_sq_sum"].shape == (2, spec.d_sae)


def test_subtracting_rows_equals_recomputing_them(tmp_path: Path) -> None:
    spec = SyntheticSpec(benchmarks=("a", "b"), rows_per_benchmark=200, d_sae=64, nnz=8, seed=1)
    table = load_row_table(open_rows(write_synthetic_rows(tmp_path / "rows.parquet", spec)))
    dropped = np.arange(0, table.n_rows, 5)
    kept = np.setdiff1d(np.arange(table.n_rows), dropped)
    by_subtraction = subtract(table.accumulate(), table.accumulate(dropped))
    direct = table.accumulate(kept)
    for name in ("a", "b"):
        np.testing.assert_allclose(
            by_subtraction.benchmarks[name].scored_act_sq_sum, direct.benchmarks[name].scored_act_sq_sum, atol=1e-9
        )


def test_effective_support_counts_equal_weights_as_rows() -> None:
    assert effective_support(np.array([5.0 * 0.3]), np.array([5.0 * 0.09]))[0] == pytest.approx(5.0)
    assert effective_support(np.array([10.0 + 0.01]), np.array([100.0 + 1e-4]))[0] == pytest.approx(1.0, abs=0.01)
    assert np.isnan(effective_support(np.array([0.0]), np.array([0.0]))[0])
    low, high = wilson_interval(np.array([0.5, np.nan]), np.array([100.0, 10.0]))
    assert low[0] == pytest.approx(0.4038, abs=1e-3) and high[0] == pytest.approx(0.5962, abs=1e-3)
    assert np.isnan(low[1]) and np.isnan(high[1])


def _planted_coverage(seed: int, tmp_path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    spec = SyntheticSpec(d_sae=512, rows_per_benchmark=800, seed=seed)
    truth_spec = SyntheticSpec(d_sae=512, rows_per_benchmark=30_000, seed=seed, row_seed=1)
    sample = compute_metrics(accumulate_rows(open_rows(write_synthetic_rows(tmp_path / f"s{seed}.parquet", spec))))
    truth = compute_metrics(accumulate_rows(open_rows(write_synthetic_rows(tmp_path / f"t{seed}.parquet", truth_spec))))
    plan = SyntheticPlan.draw(np.random.default_rng(seed), spec)
    planted = (plan.effect != 0) & (sample.n_active_rows >= PLANTED_MIN_ROWS) & ~np.isnan(sample.X_model)
    defined = ~np.isnan(sample.chi_model)
    # The planted X_model over the benchmarks where the sample defines it (the estimand of X_model).
    truth_chi = np.where(defined, truth.chi_model, np.nan)
    truth_x = np.nanmean(np.where(defined[:, planted], truth_chi[:, planted], np.nan), axis=0)
    u = sample.uncertainty
    x_inside = (truth_x >= u.X_model_low[planted]) & (truth_x <= u.X_model_high[planted])
    pairs = defined & planted[None, :] & (sample.active_rows >= PLANTED_MIN_ROWS)
    chi_inside = (truth.chi_model[pairs] >= u.chi_model_low[pairs]) & (
        truth.chi_model[pairs] <= u.chi_model_high[pairs]
    )
    gap_inside = (truth.uncertainty.adjusted_gap[planted] >= u.adjusted_gap_low[planted]) & (
        truth.uncertainty.adjusted_gap[planted] <= u.adjusted_gap_high[planted]
    )
    return x_inside, chi_inside, gap_inside


@pytest.mark.slow
def test_nominal_95_intervals_contain_the_planted_values(tmp_path: Path) -> None:
    x_in, chi_in, gap_in = (
        np.concatenate(p) for p in zip(*(_planted_coverage(s, tmp_path) for s in range(3)), strict=True)
    )
    assert x_in.size >= 100 and chi_in.size >= 200
    print(
        f"coverage: X_model {x_in.mean():.3f} of {x_in.size}, chi_model {chi_in.mean():.3f} of {chi_in.size}, "
        f"adjusted gap {gap_in.mean():.3f}"
    )
    assert x_in.mean() >= 0.93
    assert chi_in.mean() >= 0.93
    assert gap_in.mean() >= 0.90  # truth estimated from a finite sample too: a little slack


def test_adjusted_gap_is_zero_in_expectation_when_scores_depend_only_on_the_benchmark() -> None:
    spec = SyntheticSpec(rows_per_benchmark=1500, d_sae=256, nnz=16, seed=5)
    rng = np.random.default_rng(11)
    difficulty = dict(zip(spec.benchmarks, np.linspace(0.2, 0.9, len(spec.benchmarks)), strict=True))
    acc = CGAccumulator(spec.d_sae)
    for batch in iter_synthetic_batches(spec):
        codes, names, _, offsets, ids, acts = _batch_arrays(batch)
        p = np.array([difficulty[names[c]] for c in codes])
        scores = (rng.random(len(codes)) < p).astype(np.float64)
        acc.add_batch(codes, names, scores, offsets, ids, acts)
    result = compute_metrics(acc, MetricsConfig())
    u = result.uncertainty
    ok = (result.n_active_rows >= PLANTED_MIN_ROWS) & ~np.isnan(u.adjusted_gap)
    gaps = u.adjusted_gap[ok]
    assert gaps.size >= 100
    assert abs(gaps.mean()) < 3 * gaps.std() / np.sqrt(gaps.size)
    covers_zero = (u.adjusted_gap_low[ok] <= 0) & (u.adjusted_gap_high[ok] >= 0)
    assert covers_zero.mean() >= 0.93


def test_constant_scores_give_a_zero_adjusted_gap_and_a_degenerate_chi() -> None:
    acc = CGAccumulator(4)
    acc.add_batch(
        np.array([0, 0, 1]),
        ["a", "b"],
        np.array([0.7, 0.7, 0.7]),
        np.array([0, 2, 3, 5]),
        np.array([0, 1, 1, 1, 2]),
        np.array([1.0, 2.0, 1.0, 3.0, 1.0], dtype=np.float32),
    )
    result = compute_metrics(acc, MetricsConfig(min_rows=1))
    u = result.uncertainty
    np.testing.assert_allclose(u.adjusted_gap[:3], 0.0, atol=1e-12)
    assert np.isnan(u.adjusted_gap[3]) and np.isnan(u.X_model_low[3])
    assert u.concept_n_eff[1] == pytest.approx((2 + 1 + 3) ** 2 / (4 + 1 + 9))
    assert (u.X_model_low[:3] <= 0.7).all() and (u.X_model_high[:3] >= 0.7).all()
