"""Each split's choosing-half residuals, summed in the one pass, equal a pass over that half alone."""

from __future__ import annotations

import numpy as np
import pytest

from cg_ray.profile.residual import ResidualAccumulator


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_sums_equal_a_pass_over_the_choosing_rows_alone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, d, splits, parts = 300, 40, 4, 5
    lengths = rng.integers(0, 6, n)  # rows with no active concept too
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = rng.integers(0, d, offsets[-1])  # a concept may repeat within a row
    acts = np.where(rng.random(offsets[-1]) < 0.2, 0.0, rng.random(offsets[-1]))  # zeros are not active
    scores = np.where(rng.random(n) < 0.1, np.nan, rng.random(n))  # unscored rows are skipped
    expected = rng.random(n)
    part = rng.integers(0, parts, n)
    chosen_parts = [rng.random(parts) < 0.5 for _ in range(splits)]
    choosing = [c[part] for c in chosen_parts]
    # a split's cell means are undefined off its choosing rows (NaN): they must not reach its sums
    split_expected = [np.where(c, rng.random(n), np.nan) for c in choosing]

    acc = ResidualAccumulator(d, parts=parts, splits=splits)
    for lo, hi in ((0, 120), (120, n)):  # two batches, as the pass streams them
        acc.add(
            offsets[lo : hi + 1] - offsets[lo],
            ids[offsets[lo] : offsets[hi]],
            acts[offsets[lo] : offsets[hi]],
            scores[lo:hi],
            expected[lo:hi],
            part[lo:hi],
            [e[lo:hi] for e in split_expected],
            [c[lo:hi] for c in choosing],
        )
    for s in range(splits):
        alone = ResidualAccumulator(d)
        alone.add(offsets, ids, acts, np.where(choosing[s], scores, np.nan), split_expected[s])
        ours, naive = acc.finish_split(s, chosen_parts[s]), alone.finish()
        for got, want in zip(
            (ours.residual, ours.low, ours.high, ours.n_eff),
            (naive.residual, naive.low, naive.high, naive.n_eff),
            strict=True,
        ):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, equal_nan=True)
        assert np.isfinite(ours.residual).sum() > 10  # the check compared concepts, not only NaNs
