"""Active estimation of a new model's scores from a budget of rows (`cg-ray estimate`).

The prior: the other models' per-row scores define a Gaussian over a model's row-score vector,
y ~ N(μ, Σ), with Σ = WWᵀ + σ²I from probabilistic PCA over rows (sklearn's PCA.get_covariance(), the
closed-form Tipping–Bishop estimate: a Gaussian process whose kernel between two rows is learnt from how
the other models scored them — rows that the same models pass or fail co-vary). A per-row noise (factor
analysis, Ψ) was tried first and was worse: rows that nearly every model passes get a tiny Ψ and then
dominate the conditional mean. Given the rows observed so far, the
unobserved ones have the Gaussian conditional mean; the overall score is the mean over all rows
(observed values + conditional means) and its variance is wᵀΣ_post w.

Choice of rows (ACE-style variance reduction, aimed at the quantity we report): the next row is the one
that most reduces the posterior variance of the overall score, (Σ_post w)_i² / Σ_post,ii, followed by the
rank-one update of Σ_post. Because a Gaussian posterior covariance does not depend on the observed values,
this order is a fixed design computable before any row is run; batches only set when the stopping rule
(the overall interval) is checked.

That greedy order is optimal only if the prior is right, and for an unseen model it is not: on AlpacaEval
2.0 about half of a held-out model's per-row variance lies outside the span of the other models' rows (see
`span_floor`), and the greedy picks concentrate on rows the prior finds informative, leaving the estimate
to extrapolate to the rest. The default design (`balanced_order`) is therefore a nested sample spread
evenly over row easiness (the other models' mean score on each row): a scrambled van der Corput sequence
over the rows sorted by easiness, so every prefix of the order is close to a proportionally stratified
sample, and the posterior estimate stays close to design-unbiased (`--design greedy` keeps ACE's order).

The greedy loop and the rank-one update are written here in numpy: it is a few lines, and the libraries
that offer GP active learning (botorch, gpytorch) would add torch optimisation of a kernel we already have
in closed form.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class RowPrior:
    """y ~ N(mean, factor·factorᵀ + noise·I): a low-rank-plus-diagonal covariance, kept as its factor
    (n_rows × (K + 1): the K scaled principal directions and the level column) so that nothing of size
    n_rows × n_rows is ever formed — conditioning goes through the Woodbury identity in O(n_rows·K²)."""

    mean: np.ndarray  # (n_rows,)
    factor: np.ndarray  # (n_rows, K + 1)
    noise: float  # σ², the per-row variance outside the K components
    low: float
    high: float
    basis: np.ndarray  # (n_components, n_rows): the principal directions of the other models' rows

    def diag(self) -> np.ndarray:
        """The prior variance of each row."""
        return np.asarray(np.einsum("ij,ij->i", self.factor, self.factor) + self.noise)

    @property
    def cov(self) -> np.ndarray:
        """The full covariance (n_rows × n_rows): for checks and the naive benchmark baseline only."""
        return np.asarray(self.factor @ self.factor.T + self.noise * np.eye(self.mean.size))


def fit_prior(
    others: np.ndarray, n_components: int, seed: int = 0, level_var: float = 1.0, noise: str = "sample"
) -> RowPrior:
    """Gaussian prior over a model's row scores from the other models (models × rows, NaN = missing).
    Missing cells are filled with the row's mean over the models that have it.

    `noise`: the per-row variance σ² left outside the K components. "mle" is Tipping–Bishop's estimate,
    the discarded variance spread over all n_rows − K directions; "sample" is sklearn's noise_variance_
    (as in its PCA.get_covariance), which with fewer models than rows averages only the n_models − 1 − K
    non-zero discarded eigenvalues and so overstates σ² by about (n_rows − K) / (n_models − 1 − K) (17× for
    58 models × 805 rows). The overstated σ² shrinks the conditional mean more and is the more accurate on
    AlpacaEval (LOMO RMSE at 10% 0.019 vs 0.022 with "mle"); both SEs are miscalibrated, which
    `cg_ray/skills/calibrate.py` corrects (docs/skills.md)."""
    from sklearn.decomposition import PCA

    data = np.asarray(others, dtype=float)
    col_mean = np.nanmean(data, axis=0)
    col_mean = np.where(np.isnan(col_mean), np.nanmean(data), col_mean)
    filled = np.where(np.isnan(data), col_mean, data)
    k = int(min(n_components, max(1, filled.shape[0] - 2)))
    pca = PCA(n_components=k, svd_solver="full", random_state=seed).fit(filled)
    if noise == "mle":
        total = float(filled.var(axis=0, ddof=1).sum())
        sigma2 = max(total - float(pca.explained_variance_.sum()), 0.0) / max(filled.shape[1] - k, 1)
    elif noise == "sample":
        sigma2 = float(pca.noise_variance_)
    else:
        raise ValueError(f"noise must be 'mle' or 'sample', got {noise!r}")
    scale = np.maximum(pca.explained_variance_ - sigma2, 0.0)
    # + τ²·11ᵀ as one more factor column: a diffuse prior on the new model's overall level (kriging with an
    # unknown mean), so the level comes from its own rows and not from the other models' average
    level = np.full((filled.shape[1], 1), np.sqrt(level_var))
    return RowPrior(
        mean=np.asarray(pca.mean_, dtype=float),
        factor=np.hstack([pca.components_.T * np.sqrt(scale), level]),
        noise=sigma2,
        low=float(np.nanmin(data)),
        high=float(np.nanmax(data)),
        basis=np.asarray(pca.components_, dtype=float),
    )


def balanced_order(
    prior: RowPrior, available: np.ndarray, n_pick: int, seed: int = 0, start: np.ndarray | None = None
) -> np.ndarray:
    """Rows (indices into the prior) in a nested order balanced on row easiness (the prior mean).

    The rows are sorted by easiness; a scrambled 1-D Halton (van der Corput) sequence, which fills [0, 1)
    evenly at every prefix length, picks the rank at each step (a rank already taken moves to the nearest
    free rank above, wrapping round). `start` (rows already observed) are skipped, so a prefix of the
    order as `start` continues it exactly, as with `active_order`."""
    from scipy.stats import qmc

    idx = np.flatnonzero(available)
    ranked = idx[np.lexsort((prior.diag()[idx], prior.mean[idx]))]  # ties in easiness: by variance
    seen = {int(r) for r in (start if start is not None else [])}
    # enough points for the rows asked for after `start`; all of them if `start` strays from the order
    for n_points in (min(idx.size, n_pick + len(seen)), idx.size):
        points = qmc.Halton(d=1, scramble=True, seed=seed).random(n_points)[:, 0]
        order = ranked[_free_ranks((points * idx.size).astype(int), idx.size)]
        rest = [int(r) for r in order if int(r) not in seen][:n_pick]
        if len(rest) == n_pick or n_points == idx.size:
            return np.asarray(rest, dtype=int)
    raise AssertionError("unreachable")


def _free_ranks(wanted: np.ndarray, size: int) -> np.ndarray:
    """Each wanted rank, or the next free one above it (wrapping round) once it is taken.

    A disjoint-set "next free slot" with path halving keeps this near-linear (a scan per step would be
    quadratic in the suite's rows); no library offers this small structure."""
    nxt = np.arange(size + 1)  # nxt[r] == r: rank r is free; size stands for "wrap to 0"

    def find(r: int) -> int:
        while nxt[r] != r:
            nxt[r] = nxt[nxt[r]]
            r = int(nxt[r])
        return r

    out = np.empty(wanted.size, dtype=int)
    for k, want in enumerate(wanted):
        r = find(int(want))
        if r == size:
            r = find(0)
        out[k] = r
        nxt[r] = r + 1
    return out


def choose_rows(
    prior: RowPrior,
    available: np.ndarray,
    n_pick: int,
    design: str,
    seed: int = 0,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """The next `n_pick` rows of the design ("balanced" or "greedy") after the rows in `start`."""
    if design == "balanced":
        return balanced_order(prior, available, n_pick, seed, start)
    if design == "greedy":
        return active_order(prior, available, n_pick, start=start)
    raise ValueError(f"design must be 'balanced' or 'greedy', got {design!r}")


def span_floor(prior: RowPrior, y: np.ndarray, n_rows: int) -> float:
    """Expected squared error of the mean over the model's scored rows from `n_rows` of them drawn at
    random, if the model's component inside the prior's span (level, row means, the K principal directions)
    were known exactly: what is left is its per-row residual outside that span, whose mean over n of N rows
    has variance S²·(1/n − 1/N). Fitted with all the model's rows, so it is the error of an estimator that
    knew the model's coordinates, not a strict bound (a shrinking posterior can sit slightly below it)."""
    seen = ~np.isnan(y)
    design = np.column_stack([np.ones(seen.sum()), prior.mean[seen], prior.basis[:, seen].T])
    coef, *_ = np.linalg.lstsq(design, y[seen], rcond=None)
    resid = y[seen] - design @ coef
    n_total = int(seen.sum())
    n = min(max(n_rows, 1), n_total)
    return float(resid.var(ddof=1) * (1.0 / n - 1.0 / n_total)) if n_total > 1 else 0.0


def tie_safe(gain: np.ndarray) -> np.ndarray:
    """Gains rounded to 12 significant digits of the largest: rows with the same scores across the other
    models tie exactly and go to the lowest index, whichever order the arithmetic summed in."""
    top = float(np.max(np.abs(gain))) if gain.size else 0.0
    return np.round(gain / top, 12) if top > 0 else gain


def active_order(
    prior: RowPrior,
    available: np.ndarray,
    n_pick: int,
    jitter: float = 1e-9,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Greedy rows (indices into the prior) that most reduce the variance of the mean over `available`.

    `start`: rows already observed (indices into the prior, all available): conditioned on first, in their
    order, and not returned; the result is the next `n_pick` rows. A prefix of the greedy order as `start`
    continues that order exactly (what `--observed` relies on).

    Σ_post is never formed: Σ_post[:, i] = Σ[:, i] − Σ_k u_k u_k[i] (incremental Cholesky), so only
    v = Σ_post w and diag(Σ_post) are kept up to date — O(n·t) per step instead of O(n²); Σ[:, i] itself
    comes from the prior's factor, so no n × n matrix is held."""
    idx = np.flatnonzero(available)
    position = {int(r): k for k, r in enumerate(idx)}
    seeded = [position[int(r)] for r in (start if start is not None else [])]
    factor = prior.factor[idx]
    total = min(n_pick + len(seeded), idx.size)
    w = np.full(idx.size, 1.0 / idx.size)
    v = factor @ (factor.T @ w) + prior.noise * w
    diag = prior.diag()[idx]
    factors = np.zeros((total, idx.size))
    open_ = np.ones(idx.size, dtype=bool)
    chosen: list[int] = []
    for t in range(total):
        if t < len(seeded):
            i = seeded[t]
        else:
            i = int(np.argmax(np.where(open_, tie_safe(v**2 / np.maximum(diag, jitter)), -np.inf)))
        col = factor @ factor[i] - factors[:t].T @ factors[:t, i]
        col[i] += prior.noise
        u = col / np.sqrt(max(col[i], jitter))
        factors[t] = u
        v -= u * (u @ w)
        diag -= u**2
        open_[i] = False
        chosen.append(i)
    return np.asarray(idx[np.asarray(chosen[len(seeded) :], dtype=int)])


@dataclass
class Estimate:
    overall: float
    overall_se: float
    per_task: dict[str, float] = field(default_factory=dict)
    per_task_se: dict[str, float] = field(default_factory=dict)
    per_concept: np.ndarray = field(default_factory=lambda: np.zeros(0))  # χ_model of each weighted concept
    per_concept_se: np.ndarray = field(default_factory=lambda: np.zeros(0))
    overall_se_model: float = float("nan")  # the prior's SE, before calibration (cg_ray/skills/calibrate.py)
    se_scale: float = 1.0  # overall_se / overall_se_model once calibrated
    task_se_scale: float = 1.0  # the factor applied to every per-task SE
    concept_se_scale: float = 1.0  # the factor applied to every per-concept SE


def group_weights(
    available: np.ndarray, tasks: np.ndarray, concepts: np.ndarray | None
) -> tuple[list[str], np.ndarray]:
    """available rows × groups: the overall mean, each task's mean, each concept's s̃-weighted mean
    (χ_model over the available rows; a concept none of them activates gets all-zero weights → NaN)."""
    idx = np.flatnonzero(available)
    names = ["", *(str(t) for t in np.unique(tasks[idx]))]
    columns = [np.full(idx.size, 1.0 / idx.size)]
    columns += [(tasks[idx] == t) / np.sum(tasks[idx] == t) for t in np.unique(tasks[idx])]
    if concepts is not None:
        raw = concepts[:, idx]
        total = raw.sum(axis=1, keepdims=True)
        columns += list(np.where(total > 0, raw / np.where(total > 0, total, 1.0), 0.0))
    return names, np.stack(columns, axis=1)


def posterior_estimate(
    prior: RowPrior,
    available: np.ndarray,
    observed: np.ndarray,
    values: np.ndarray,
    tasks: np.ndarray,
    concepts: np.ndarray | None = None,
) -> Estimate:
    """Estimate of the mean over `available` rows given exact scores `values` at row indices `observed`;
    with `concepts` (concepts × all rows, s̃), also each concept's χ_model over the available rows."""
    idx = np.flatnonzero(available)
    obs = np.asarray(observed, dtype=int)
    unobs = np.setdiff1d(idx, obs)
    fill = np.zeros(prior.mean.size)
    fill[obs] = values
    names, weights = group_weights(available, tasks, concepts)
    w_u = weights[np.searchsorted(idx, unobs)]  # unobs × groups
    # Σ = F Fᵀ + σ²I: every product below goes through the factor F (Woodbury), never an n × n matrix
    f_u = prior.factor[unobs]
    proj_u = f_u.T @ w_u  # F_uᵀ w_u, (K + 1) × groups
    var = prior.noise * np.einsum("ug,ug->g", w_u, w_u) + np.einsum("kg,kg->g", proj_u, proj_u)
    if obs.size:
        f_o = prior.factor[obs]
        noise_o = prior.noise + 1e-6  # the jitter keeps Σ_oo well conditioned when σ² is tiny
        inner = noise_o * np.eye(f_o.shape[1]) + f_o.T @ f_o

        def solve_oo(x: np.ndarray) -> np.ndarray:  # Σ_oo⁻¹ x by Woodbury
            return np.asarray((x - f_o @ np.linalg.solve(inner, f_o.T @ x)) / noise_o)

        resid = np.asarray(values, dtype=float) - prior.mean[obs]
        fill[unobs] = prior.mean[unobs] + f_u @ (f_o.T @ solve_oo(resid))  # Σ_uo = F_u F_oᵀ (disjoint rows)
        b = f_o @ proj_u  # Σ_ou w_u, obs × groups
        var -= np.einsum("og,og->g", b, solve_oo(b))
    else:
        fill[unobs] = prior.mean[unobs]
    fill[unobs] = np.clip(fill[unobs], prior.low, prior.high)
    means = fill[idx] @ weights
    se = np.sqrt(np.maximum(var, 0.0))
    n_groups = len(names)
    out = Estimate(overall=float(means[0]), overall_se=float(se[0]), overall_se_model=float(se[0]))
    for g in range(1, n_groups):
        out.per_task[names[g]], out.per_task_se[names[g]] = float(means[g]), float(se[g])
    if concepts is not None:
        empty = weights[:, n_groups:].sum(axis=0) == 0
        out.per_concept = np.where(empty, np.nan, means[n_groups:])
        out.per_concept_se = np.where(empty, np.nan, se[n_groups:])
    return out


def random_estimate(
    values: np.ndarray,
    observed: np.ndarray,
    available: np.ndarray,
    tasks: np.ndarray,
    concepts: np.ndarray | None = None,
) -> Estimate:
    """The plain estimate from a random sample: the mean of the sampled rows (per task: of its sampled rows,
    or the overall sample mean for a task with none sampled; per concept: χ_model over the sampled rows, as
    CG would compute it on the sample, or the overall sample mean when none of them activates it)."""
    sample = values[observed]
    overall = float(sample.mean())
    se = float(sample.std(ddof=1) / np.sqrt(sample.size)) if sample.size > 1 else float("nan")
    out = Estimate(overall=overall, overall_se=se)
    for task in np.unique(tasks[available]):
        hit = observed[tasks[observed] == task]
        out.per_task[str(task)] = float(values[hit].mean()) if hit.size else overall
    if concepts is not None:
        w = concepts[:, observed]
        total = w.sum(axis=1)
        out.per_concept = np.where(total > 0, (w @ sample) / np.where(total > 0, total, 1.0), overall)
    return out
