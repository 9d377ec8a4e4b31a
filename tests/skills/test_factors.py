"""PAF + varimax recovers a planted structure; the number-of-factors criteria see it too."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.linalg import subspace_angles

from cg_ray.skills.factors import choose_n_factors, fit_factors, ledermann_bound, scree_elbow, standardise

from .planted import two_factor_matrix


def _match(found: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Congruence of each true factor with its best found factor, up to sign and order."""
    c = np.abs((found / np.linalg.norm(found, axis=0)).T @ (true / np.linalg.norm(true, axis=0)))
    return c.max(axis=0)


def test_paf_varimax_recovers_planted_two_factors() -> None:
    frame, true = two_factor_matrix()
    z = standardise(frame)
    choice = choose_n_factors(z, forced=None, iterations=100, quantile=0.95, seed=0)
    assert choice["n_factors"] == 2 and choice["criteria"]["parallel_analysis"] == 2
    sol = fit_factors(z.to_numpy(), 2)
    assert np.all(_match(sol.loadings, true) > 0.95)
    main = np.argmax(np.abs(sol.loadings), axis=1)
    assert len(set(main[:4])) == 1 and len(set(main[4:])) == 1 and main[0] != main[4]
    # planted loadings are recovered in size too, not only in pattern
    best = sol.loadings[:, main[[0, 4]]]
    assert np.max(np.abs(np.abs(best) - true)) < 0.2
    # regression factor scores correlate with the planted skills' composite
    assert abs(np.corrcoef(sol.scores[:, main[0]], z.iloc[:, :4].mean(axis=1))[0, 1]) > 0.9


def _iterated_paf(corr: np.ndarray, k: int, iters: int = 500) -> np.ndarray:
    """Textbook iterated principal axis factoring (SMC start), only to check factor_analyzer's minres."""
    h2 = 1 - 1 / np.diag(np.linalg.inv(corr))
    for _ in range(iters):
        reduced = corr.copy()
        np.fill_diagonal(reduced, h2)
        val, vec = np.linalg.eigh(reduced)
        lam = vec[:, -k:] * np.sqrt(np.maximum(val[-k:], 0))
        h2 = (lam**2).sum(axis=1)
    return lam


def test_minres_is_the_iterated_paf_solution() -> None:
    frame, _ = two_factor_matrix(seed=3)
    z = standardise(frame).to_numpy()
    sol = fit_factors(z, 2)
    paf = _iterated_paf(np.corrcoef(z, rowvar=False), 2)
    # same common-factor subspace and communalities (rotation differs: PAF is unrotated)
    assert np.allclose(sol.communalities, (paf**2).sum(axis=1), atol=0.01)
    assert np.degrees(np.max(subspace_angles(sol.loadings, paf))) < 2.0


def test_one_factor_when_one_is_planted() -> None:
    rng = np.random.default_rng(1)
    g = rng.standard_normal(80)
    frame = pd.DataFrame({f"t{j}": 0.8 * g + 0.6 * rng.standard_normal(80) for j in range(6)})
    choice = choose_n_factors(standardise(frame), forced=None, iterations=100, quantile=0.95, seed=0)
    assert choice["n_factors"] == 1 and choice["criteria"]["kaiser"] == 1
    forced = choose_n_factors(standardise(frame), forced=9, iterations=20, quantile=0.95, seed=0)
    assert forced["capped"] and forced["n_factors"] == ledermann_bound(6) == 3


def test_scree_elbow_and_ledermann() -> None:
    assert scree_elbow(np.array([3.0, 0.5, 0.4, 0.1])) == 1
    assert scree_elbow(np.array([3.0, 2.5, 0.3, 0.2, 0.1])) == 2
    assert ledermann_bound(5) == 2 and ledermann_bound(3) == 1 and ledermann_bound(8) == 4
