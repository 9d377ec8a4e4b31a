"""Gaps that fire on the same reference rows are one theme; gaps on other rows are another."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from cg_ray.scope.counts import SuiteActivations, firing_counts
from cg_ray.scope.reference import compare
from cg_ray.scope.themes import gap_themes


def test_co_firing_gaps_are_one_theme_and_others_their_own() -> None:
    rng = np.random.default_rng(0)
    d, n_ref, n_bench = 40, 600, 600
    n = n_ref + n_bench
    dense = np.zeros((n, d))
    dense[:, 10:] = rng.uniform(0.5, 1.5, size=(n, d - 10)) * (rng.random((n, d - 10)) < 0.2)  # shared background
    together = rng.random(n_ref) < 0.2  # concepts 1 and 2 fire on the same fifth of the reference
    apart = rng.random(n_ref) < 0.2  # concept 3 on another fifth
    dense[:n_ref, 1] = together * 1.0
    dense[:n_ref, 2] = together * 2.0
    dense[:n_ref, 3] = apart * 1.0
    groups = np.array(["ref"] * n_ref + ["bench"] * n_bench)
    acts = SuiteActivations(sparse.csc_matrix(dense), groups, [str(i) for i in range(n)])
    counts = firing_counts(acts)
    (kb, nb), (kr, nr) = counts.of("bench"), counts.of("ref")
    cmp = compare(kb, nb, kr, nr, benchmark="bench", reference="ref")
    assert set(cmp.gaps["concept"]) == {1, 2, 3}
    themes = gap_themes(acts, counts.thresholds, cmp, ["ref"])
    assert sorted(sorted(t.members) for t in themes) == [[1, 2], [3]]
    pair = next(t for t in themes if len(t.members) == 2)
    assert pair.representative == pair.members[0] and pair.reference_rows == together.sum() and pair.bench_rows == 0
