"""Bradley–Terry and Elo ratings of battles, with seeded percentile bootstrap confidence intervals.

Bradley–Terry: P(i beats j) = σ(θ_i − θ_j). Fitted by maximum likelihood with Newton's method on the
(m × m) matrix of pairwise wins, so the cost after one aggregation pass is independent of the number of
battles. A tie counts as half a win for each side (or is dropped, per `TiePolicy`); that is the usual
Arena convention and gives the same fit as duplicating every battle with the tie split 1–1.

Elo: the online update r_a += K·(s_a − E_a), E_a = 1 / (1 + base^((r_b − r_a)/scale)), all models starting at
`anchor_rating`. Its result depends on the battle order, so by default it is the mean over seeded random
shuffles (`elo_permutations`); 0 runs the battles once in source order.

Both are reported on the `scale`·log_`base` odds scale (400·log10 by default), anchored so that the mean
rating of the rated models is `anchor_rating`, or so that `anchor_model` sits at it.

Bootstrap: each resample draws the battles with replacement. For BT the fit needs only the pairwise
counts, which are resampled exactly as a multinomial over the (pair, outcome) cells; for Elo each resample
is played in a random order. CIs are the (1−confidence)/2 and (1+confidence)/2 percentiles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypedDict

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from cg_ray.arena.config import RatingsConfig, TiePolicy
from cg_ray.arena.outcomes import BattleArrays, rating_scores

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_ELO_CHUNK_ENTRIES = 8_000_000  # Elo orders are materialized in blocks of at most this many indices


class NotIdentifiable(ValueError):
    """The BT maximum-likelihood estimate does not exist (some group of models never lost, or never won)."""


def _log_sigmoid(x: FloatArray) -> FloatArray:
    return -np.logaddexp(0.0, -x)


def _sigmoid(x: FloatArray) -> FloatArray:
    return np.exp(_log_sigmoid(x))


def pair_wins(a: IntArray, b: IntArray, score_a: FloatArray, m: int, weights: FloatArray | None = None) -> FloatArray:
    """W[i, j] = (weighted) wins of i over j; battles with a NaN score are left out."""
    keep = ~np.isnan(score_a)
    a, b, s = a[keep], b[keep], score_a[keep]
    w = np.ones(len(s)) if weights is None else weights[keep]
    wins = np.bincount(a * m + b, weights=w * s, minlength=m * m) + np.bincount(
        b * m + a, weights=w * (1.0 - s), minlength=m * m
    )
    return np.asarray(wins, dtype=np.float64).reshape(m, m)


def _check_identifiable(wins: FloatArray, names: list[str]) -> None:
    n, labels = connected_components(csr_matrix(wins > 0), directed=True, connection="strong")
    if n > 1:
        groups = [[names[i] for i in np.flatnonzero(labels == g)] for g in range(n)]
        raise NotIdentifiable(
            "the Bradley–Terry MLE does not exist: the models split into groups where one group never lost "
            f"to (or never beat) another: {groups}; set a prior > 0"
        )


def fit_bradley_terry(
    wins: FloatArray,
    *,
    prior: float = 0.0,
    names: list[str] | None = None,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> FloatArray:
    """Natural-log strengths θ (mean 0 over models with battles; NaN for models without) from W.

    `prior` adds, for every model, prior/2 wins and prior/2 losses against a virtual opponent with θ = 0.
    """
    m = wins.shape[0]
    games = wins + wins.T
    active = games.sum(axis=1) > 0
    theta = np.full(m, np.nan)
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return theta
    W = wins[np.ix_(idx, idx)]
    G = games[np.ix_(idx, idx)]
    k = idx.size
    if prior == 0.0:
        _check_identifiable(W, [(names or [str(i) for i in range(m)])[i] for i in idx])
    row_wins = W.sum(axis=1)

    def loglik(t: FloatArray) -> float:
        d = t[:, None] - t[None, :]
        value = float((W * _log_sigmoid(d)).sum())
        return value + prior / 2 * float((_log_sigmoid(t) + _log_sigmoid(-t)).sum())

    t = np.zeros(k)
    current = loglik(t)
    for _ in range(max_iter):
        P = _sigmoid(t[:, None] - t[None, :])
        grad = row_wins - (G * P).sum(axis=1)
        V = G * P * (1.0 - P)
        H = np.diag(V.sum(axis=1)) - V  # the negative Hessian: PSD, null space 1 when prior = 0
        if prior:
            q = _sigmoid(t)
            grad = grad + prior * (0.5 - q)
            H = H + np.diag(prior * q * (1.0 - q))
        else:
            H = H + 1.0 / k  # fixes the free shift (grad ⟂ 1) without changing the step
        if np.abs(grad).max() <= tol * max(1.0, G.sum()):
            break
        step = np.linalg.solve(H, grad)
        # Backtracking keeps every step an ascent step (Newton can overshoot far from the optimum).
        scale = 1.0
        while scale > 1e-8:
            candidate = t + scale * step
            value = loglik(candidate)
            if value >= current - 1e-12 * abs(current):
                break
            scale /= 2
        t, current = candidate, value
        if np.abs(scale * step).max() < tol:
            break
    theta[idx] = t - t.mean()
    return theta


def elo_ratings(
    a: IntArray,
    b: IntArray,
    score_a: FloatArray,
    m: int,
    orders: IntArray,
    *,
    k: float,
    scale: float,
    base: float,
    initial: float,
    ratings: FloatArray | None = None,
) -> FloatArray:
    """Online Elo played once per row of `orders` (R × T battle indices), all rows in parallel → (R × m).

    `ratings` (R × m) continues earlier runs (updated in place), so long orders can be fed in blocks.
    """
    n_rep = orders.shape[0]
    if ratings is None:
        ratings = np.full((n_rep, m), initial, dtype=np.float64)
    reps = np.arange(n_rep)
    for step in range(orders.shape[1]):
        kth = orders[:, step]
        ia, ib, s = a[kth], b[kth], score_a[kth]
        ra, rb = ratings[reps, ia], ratings[reps, ib]
        delta = k * (s - 1.0 / (1.0 + base ** ((rb - ra) / scale)))
        ratings[reps, ia] = ra + delta
        ratings[reps, ib] = rb - delta
    return ratings


# The per-model rating arrays of `Ratings`, in the order ratings.json and ratings.parquet list them.
RATING_COLUMNS: Final = ("bt", "bt_lower", "bt_upper", "elo", "elo_lower", "elo_upper")


class BootstrapCounts(TypedDict):
    ok: int
    failed: int


class RatingsDoc(TypedDict):
    """`Ratings.as_dict()`: ratings.json without the pairs; a model's entry holds its name, the RATING_COLUMNS
    (None where undefined) and its battle counts."""

    config: dict[str, Any]  # RatingsConfig.model_dump()
    tie_policy: dict[str, Any]  # TiePolicy.model_dump()
    n_battles: int
    n_counted: int
    bootstrap: BootstrapCounts
    models: list[dict[str, str | float | int | None]]


@dataclass(frozen=True)
class Ratings:
    """BT and Elo ratings (NaN: a model with no counted battle) with their bootstrap CIs."""

    models: list[str]
    bt: FloatArray
    bt_lower: FloatArray
    bt_upper: FloatArray
    elo: FloatArray
    elo_lower: FloatArray
    elo_upper: FloatArray
    wins: FloatArray  # m × m pairwise (fractional) wins counted by the fit
    counts: dict[str, dict[str, int]]
    n_battles: int
    n_counted: int  # battles left after the tie policy
    bootstrap_ok: int
    bootstrap_failed: int  # resamples where the MLE did not exist (only with prior = 0)
    config: RatingsConfig
    policy: TiePolicy

    def rating(self, model: str) -> float:
        return float(self.bt[self.models.index(model)])

    def predicted_win(self, i: int, j: int) -> float:
        """BT probability that model i beats model j."""
        per_unit = np.log(self.config.base) / self.config.scale
        return float(1.0 / (1.0 + np.exp(-(self.bt[i] - self.bt[j]) * per_unit)))

    def as_dict(self) -> RatingsDoc:
        def num(x: float) -> float | None:
            return None if np.isnan(x) else round(float(x), 3)

        order = sorted(range(len(self.models)), key=lambda i: (np.isnan(self.bt[i]), -np.nan_to_num(self.bt[i])))
        return {
            "config": self.config.model_dump(),
            "tie_policy": self.policy.model_dump(),
            "n_battles": self.n_battles,
            "n_counted": self.n_counted,
            "bootstrap": {"ok": self.bootstrap_ok, "failed": self.bootstrap_failed},
            "models": [
                {
                    "model": self.models[i],
                    **{name: num(getattr(self, name)[i]) for name in RATING_COLUMNS},
                    **self.counts[self.models[i]],
                }
                for i in order
            ],
        }


def _to_scale(theta: FloatArray, models: list[str], config: RatingsConfig) -> FloatArray:
    """Natural-log strengths (or Elo points already on scale, see `_anchor`) → anchored rating points."""
    return _anchor(theta * config.scale / np.log(config.base), models, config)


def _anchor(points: FloatArray, models: list[str], config: RatingsConfig) -> FloatArray:
    """Shift along the last axis so the mean (over rated models) or the anchor model is at anchor_rating."""
    if config.anchor_model is not None:
        ref = points[..., models.index(config.anchor_model)]
    else:
        ref = np.nanmean(points, axis=-1)
    return points - np.asarray(ref)[..., None] + config.anchor_rating


def rate(arrays: BattleArrays, config: RatingsConfig | None = None, policy: TiePolicy | None = None) -> Ratings:
    """BT + Elo ratings of all battles, with bootstrap CIs when `config.bootstrap` > 0."""
    config = config or RatingsConfig()
    policy = policy or TiePolicy()
    models, m = arrays.models, len(arrays.models)
    if config.anchor_model is not None and config.anchor_model not in models:
        raise ValueError(f"anchor model {config.anchor_model!r} played no battle (models: {models})")
    score_a = rating_scores(policy)[arrays.winner]
    counted = ~np.isnan(score_a)
    a, b, s = arrays.model_a[counted], arrays.model_b[counted], score_a[counted]
    if a.size == 0:
        raise ValueError("no battle left to rate after the tie policy")
    wins = pair_wins(a, b, s, m)
    rated = (wins + wins.T).sum(axis=1) > 0
    if config.anchor_model is not None and not rated[models.index(config.anchor_model)]:
        raise ValueError(f"anchor model {config.anchor_model!r} has no battle left after the tie policy")
    bt = _to_scale(fit_bradley_terry(wins, prior=config.prior, names=models), models, config)

    rng = np.random.default_rng(config.seed)
    n = a.size

    def play(orders: IntArray, ratings: FloatArray | None = None) -> FloatArray:
        return elo_ratings(
            a,
            b,
            s,
            m,
            orders,
            k=config.elo_k,
            scale=config.scale,
            base=config.base,
            initial=config.anchor_rating,
            ratings=ratings,
        )

    if config.elo_permutations == 0:
        elo_runs = play(np.arange(n)[None, :])
    else:
        chunk = max(1, _ELO_CHUNK_ENTRIES // n)
        parts = []
        for start in range(0, config.elo_permutations, chunk):
            reps = min(chunk, config.elo_permutations - start)
            orders = rng.permuted(np.broadcast_to(np.arange(n), (reps, n)), axis=1)
            parts.append(play(orders))
        elo_runs = np.concatenate(parts)
    elo_runs[:, ~rated] = np.nan
    elo = _anchor(elo_runs.mean(axis=0), models, config)

    lo_bt, hi_bt, lo_elo, hi_elo = (np.full(m, np.nan) for _ in range(4))
    ok = failed = 0
    if config.bootstrap:
        boot_bt, failed = bootstrap_bradley_terry(a, b, s, m, config.bootstrap, rng, prior=config.prior, names=models)
        ok = len(boot_bt)
        q = [50 * (1 - config.confidence), 50 * (1 + config.confidence)]
        # Percentiles over rated models only: unrated columns are all NaN and stay NaN.
        if ok:
            # nan-aware: a model can miss from a resample of very few battles.
            lo_bt[rated], hi_bt[rated] = np.nanpercentile(_to_scale(boot_bt, models, config)[:, rated], q, axis=0)
        boot_elo = _bootstrap_elo(n, m, config, rng, play)
        boot_elo[:, ~rated] = np.nan
        lo_elo[rated], hi_elo[rated] = np.percentile(_anchor(boot_elo, models, config)[:, rated], q, axis=0)
    return Ratings(
        models=models,
        bt=bt,
        bt_lower=lo_bt,
        bt_upper=hi_bt,
        elo=elo,
        elo_lower=lo_elo,
        elo_upper=hi_elo,
        wins=wins,
        counts=arrays.counts(),
        n_battles=len(arrays),
        n_counted=n,
        bootstrap_ok=ok,
        bootstrap_failed=failed,
        config=config,
        policy=policy,
    )


def bootstrap_bradley_terry(
    a: IntArray,
    b: IntArray,
    s: FloatArray,
    m: int,
    rounds: int,
    rng: np.random.Generator,
    *,
    prior: float = 0.0,
    names: list[str] | None = None,
) -> tuple[FloatArray, int]:
    """(resamples × m) natural-log strengths of the resamples where the MLE exists, and the failure count."""
    # Resampling battles with replacement = a multinomial over the distinct (a, b, score) cells.
    cell = (a * m + b) * 3 + np.rint(s * 2).astype(np.int64)
    cells, counts = np.unique(cell, return_counts=True)
    ca, cb = (cells // 3) // m, (cells // 3) % m
    cs = (cells % 3) / 2.0
    draws = rng.multinomial(a.size, counts / a.size, size=rounds)
    out, failed = [], 0
    for weights in draws:
        try:
            w = pair_wins(ca, cb, cs, m, weights.astype(np.float64))
            out.append(fit_bradley_terry(w, prior=prior, names=names))
        except NotIdentifiable:
            failed += 1
    return (np.array(out) if out else np.empty((0, m))), failed


def _bootstrap_elo(
    n: int, m: int, config: RatingsConfig, rng: np.random.Generator, play: Callable[[IntArray, FloatArray], FloatArray]
) -> FloatArray:
    """(resamples × m) Elo ratings, each resample drawn with replacement and played in its drawn order."""
    # All resamples advance together; indices are drawn in blocks of steps to bound memory.
    ratings = np.full((config.bootstrap, m), config.anchor_rating, dtype=np.float64)
    block = max(1, _ELO_CHUNK_ENTRIES // config.bootstrap)
    for start in range(0, n, block):
        steps = min(block, n - start)
        play(rng.integers(0, n, size=(config.bootstrap, steps), dtype=np.int64), ratings)
    return ratings
