"""Each model's benchmark score as the reference's mix would weigh it (docs/method.md, "The score as real use
would weigh it").

The row-level view gives every benchmark row its out-of-fold density ratio r = p_bench / p_reference
(uncovered.py). Weighing a row by 1/r turns the benchmark's mix into the reference's, but only where the
benchmark has rows to weigh: the estimate is of the reference's *supported* share (rows with r > `density`),
and the uncovered share, where the benchmark has at most `density` × the reference's density, is stated
beside it instead of being extrapolated from a handful of rows with huge weights.

Per model: the plain mean and the reweighted mean, each the intercept of a weighted least-squares fit with
cluster-robust (CR1, t with G − 1 df) errors by the rows' groups (statsmodels: the items of one template, or
the rows several models answered, are not independent), and the reweighted mean's effective number of rows
(Kish: (Σw)² / Σw²). Between models: where the order by reweighted score differs from the plain order, the
reweighted difference of each swapped pair with its interval, from one fit with a model indicator clustered
by group (rows both models answered are paired through their group). The weights are taken as known: their
own estimation error is not in the intervals (cross-fitting keeps a row's weight from being fitted on it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt
import statsmodels.api as sm

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ModelScore:
    model: str
    rows: int  # the model's scored benchmark rows
    plain: float  # their mean score
    plain_low: float
    plain_high: float
    weighed_rows: int  # those in the supported share (r > density): the rows the reweighted mean weighs
    reweighted: float
    low: float
    high: float
    n_eff: float  # Kish's effective number of rows of the weights


@dataclass(frozen=True)
class Swap:
    """Two models whose order by reweighted score is the reverse of their plain order."""

    above: str  # now above
    below: str
    difference: float  # above − below, reweighted
    low: float
    high: float

    @property
    def confident(self) -> bool:
        return self.low > 0.0


@dataclass(frozen=True)
class Reweighting:
    supported_share: float  # of the reference's rows: where the benchmark has rows to weigh
    density: float
    models: list[ModelScore]
    swaps: list[Swap]

    def as_dict(self) -> dict[str, object]:
        """For summary.json: a figure that is not finite (no interval from one group) is null."""

        def finite(d: dict[str, object]) -> dict[str, object]:
            return {k: None if isinstance(v, float) and not np.isfinite(v) else v for k, v in d.items()}

        return {
            "supported_share": self.supported_share,
            "density": self.density,
            "models": [finite(asdict(m)) for m in self.models],
            "swaps": [finite({**asdict(s), "confident": s.confident}) for s in self.swaps],
        }


def _codes(groups: npt.NDArray[np.generic]) -> npt.NDArray[np.int64]:
    return np.unique(np.asarray(groups).astype(str), return_inverse=True)[1].astype(np.int64)


def weighted_mean(
    scores: FloatArray, weights: FloatArray, groups: npt.NDArray[np.generic], confidence: float
) -> tuple[float, float, float]:
    """(mean, low, high): the WLS intercept with cluster-robust errors by group (no interval with one group)."""
    x = np.ones((scores.size, 1))
    codes = _codes(groups)
    fit = sm.WLS(scores, x, weights=weights)
    if np.unique(codes).size < 2:
        mean = float(fit.fit().params[0])
        return mean, float("nan"), float("nan")
    res = fit.fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True)
    low, high = res.conf_int(alpha=1.0 - confidence)[0]
    return float(res.params[0]), float(low), float(high)


def weighted_difference(
    scores: FloatArray, weights: FloatArray, is_second: BoolArray, groups: npt.NDArray[np.generic], confidence: float
) -> tuple[float, float, float]:
    """(second − first, low, high): the model indicator's WLS coefficient, clustered by group."""
    x = np.column_stack([np.ones(scores.size), is_second.astype(np.float64)])
    res = sm.WLS(scores, x, weights=weights).fit(cov_type="cluster", cov_kwds={"groups": _codes(groups)}, use_t=True)
    low, high = res.conf_int(alpha=1.0 - confidence)[1]
    return float(res.params[1]), float(low), float(high)


def reweight(
    density_ratio: FloatArray,
    is_bench: BoolArray,
    is_ref: BoolArray,
    scores: FloatArray,
    models: npt.NDArray[np.str_],
    groups: npt.NDArray[np.generic],
    density: float,
    confidence: float = 0.95,
) -> Reweighting | None:
    """Per model, its benchmark rows' plain and reweighted mean score; None when no benchmark row is scored.
    Arrays are over the rows read (`density_ratio` NaN off both sides, `scores` NaN where unscored)."""
    ref = is_ref & np.isfinite(density_ratio)
    scored = is_bench & np.isfinite(density_ratio) & np.isfinite(scores)
    if not scored.any() or not ref.any():
        return None
    supported = scored & (density_ratio > density)
    weights = np.zeros(density_ratio.size)
    weights[supported] = 1.0 / density_ratio[supported]
    out = []
    for model in sorted(set(models[scored].tolist())):
        mine, weighed = scored & (models == model), supported & (models == model)
        plain = weighted_mean(scores[mine], np.ones(int(mine.sum())), groups[mine], confidence)
        if weighed.sum() >= 2:
            w = weights[weighed]
            rew = weighted_mean(scores[weighed], w, groups[weighed], confidence)
            n_eff = float(w.sum() ** 2 / (w**2).sum())
        else:
            rew, n_eff = (float("nan"),) * 3, 0.0
        out.append(ModelScore(model, int(mine.sum()), *plain, int(weighed.sum()), *rew, n_eff))
    swaps = []
    for a in out:
        for b in out:
            if a.plain > b.plain and b.reweighted > a.reweighted:  # b overtakes a on the reference's mix
                both = supported & np.isin(models, [a.model, b.model])
                diff = weighted_difference(
                    scores[both], weights[both], models[both] == b.model, groups[both], confidence
                )
                swaps.append(Swap(b.model, a.model, *diff))
    supported_share = float(np.mean(density_ratio[ref] > density))
    return Reweighting(supported_share, density, out, swaps)
