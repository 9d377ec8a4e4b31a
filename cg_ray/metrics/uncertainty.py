"""Support and uncertainty of the CG performance scores, added beside the paper's values (never replacing them).

From the additive sums Σ s̃, Σ s̃² and Σ m·s̃ over the scored rows of each (benchmark, concept):

- effective support n_eff = (Σ s̃)² / Σ s̃² (Kish's effective sample size of the s̃-weighted mean): n rows of
  equal weight give n, one dominant row gives ≈ 1;
- χ_model(b,c) is an s̃-weighted mean of scores in [0, 1]; its 95% interval is the Wilson score interval
  with n_eff trials and χ_model · n_eff successes (the Bernoulli variance p(1−p) bounds that of any score
  in [0, 1] with mean p, so the interval is conservative for graded scores);
- X_model(c) is the plain mean of χ_model(b,c) over the k benchmarks B_c; benchmarks are independent, so
  Var X = (1/k²) Σ_b Var χ_b, and with a common per-row variance that is the variance of a proportion over
  n_X = k² / Σ_b 1/n_eff(b,c) rows; its interval is the Wilson interval with n_X trials (one benchmark:
  exactly the χ interval);
- the difficulty-adjusted gap A(c) = Σ_b w_b (χ_model(b,c) − μ_b) / Σ_b w_b with w_b = χ_bench(b,c) over
  B_c and μ_b the mean score of benchmark b: how much worse (negative) or better the model does on rows
  with the concept than its benchmarks' overall difficulty predicts. When scores depend only on the
  benchmark, E χ_model(b,c) = μ_b and A = 0 in expectation. Its interval is normal, A ± z·se with
  se² = Σ w_b² v_b / (Σ w_b)², v_b = p̃(1−p̃)/(n_eff + z²) at the Agresti–Coull centre p̃ (so a χ of
  exactly 0 or 1 still has a variance); μ_b, estimated from all of b's rows, is treated as known.

Coverage of these nominal 95% intervals is measured on the synthetic suite with planted truth
(tests/metrics/test_uncertainty.py; docs/method.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

FloatArray = npt.NDArray[np.float64]

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Uncertainty:
    """Per (benchmark, concept) and per concept support and 95% intervals; NaN where undefined."""

    confidence: float
    n_eff: FloatArray  # B × d
    chi_model_low: FloatArray  # B × d
    chi_model_high: FloatArray  # B × d
    concept_n_eff: FloatArray  # d: pooled over benchmarks, (Σ_b Σ s̃)² / Σ_b Σ s̃²
    X_model_n_eff: FloatArray  # d: k² / Σ_b 1/n_eff(b,c), the support behind the X_model interval
    X_model_low: FloatArray  # d
    X_model_high: FloatArray  # d
    adjusted_gap: FloatArray  # d
    adjusted_gap_low: FloatArray  # d
    adjusted_gap_high: FloatArray  # d


def effective_support(act_sum: FloatArray, act_sq_sum: FloatArray) -> FloatArray:
    """(Σ s̃)² / Σ s̃²; NaN where nothing is active."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(act_sq_sum > 0, np.square(act_sum) / act_sq_sum, np.nan)


def wilson_interval(p: FloatArray, n: FloatArray, confidence: float = CONFIDENCE) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval of a proportion p over n (possibly fractional) trials; NaN where p or n is."""
    p = np.asarray(p, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    ok = ~np.isnan(p) & ~np.isnan(n) & (n > 0)
    low = np.full(p.shape, np.nan)
    high = np.full(p.shape, np.nan)
    if ok.any():
        lo, hi = proportion_confint(p[ok] * n[ok], n[ok], alpha=1.0 - confidence, method="wilson")
        low[ok] = np.clip(lo, 0.0, 1.0)
        high[ok] = np.clip(hi, 0.0, 1.0)
    return low, high


def x_model_support(n_eff: FloatArray) -> FloatArray:
    """n_X = k² / Σ_b 1/n_eff(b,c) over the benchmarks where n_eff is defined (NaN where none is)."""
    defined = ~np.isnan(n_eff)
    k = defined.sum(axis=0)
    inv = np.where(defined, 1.0 / np.where(defined, n_eff, 1.0), 0.0).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(k > 0, np.square(k) / inv, np.nan)


def adjusted_gap(
    chi_model: FloatArray,
    chi_bench: FloatArray,
    n_eff: FloatArray,
    mean_score: FloatArray,
    confidence: float = CONFIDENCE,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Saliency-weighted mean over benchmarks of χ_model(b,c) − μ_b, with a normal interval (see module doc)."""
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    defined = ~np.isnan(chi_model) & ~np.isnan(mean_score)[:, None]
    w = np.where(defined, chi_bench, 0.0)
    total = w.sum(axis=0)
    diff = np.where(defined, chi_model - np.nan_to_num(mean_score)[:, None], 0.0)
    n = np.where(defined, n_eff, 0.0)
    p_tilde = np.where(defined, (np.nan_to_num(chi_model) * n + z * z / 2) / (n + z * z), 0.5)
    var_b = p_tilde * (1.0 - p_tilde) / (n + z * z)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.where(total > 0, (w * diff).sum(axis=0) / total, np.nan)
        se = np.where(total > 0, np.sqrt((w * w * var_b).sum(axis=0)) / total, np.nan)
    return gap, np.clip(gap - z * se, -1.0, 1.0), np.clip(gap + z * se, -1.0, 1.0)


def compute_uncertainty(
    scored_act_sum: FloatArray,
    scored_act_sq_sum: FloatArray,
    chi_model: FloatArray,
    chi_bench: FloatArray,
    X_model: FloatArray,
    mean_score: FloatArray,
    confidence: float = CONFIDENCE,
) -> Uncertainty:
    n_eff = np.where(np.isnan(chi_model), np.nan, effective_support(scored_act_sum, scored_act_sq_sum))
    chi_low, chi_high = wilson_interval(chi_model, n_eff, confidence)
    concept_n_eff = effective_support(scored_act_sum.sum(axis=0), scored_act_sq_sum.sum(axis=0))
    n_x = x_model_support(n_eff)
    x_low, x_high = wilson_interval(X_model, n_x, confidence)
    gap, gap_low, gap_high = adjusted_gap(chi_model, chi_bench, n_eff, mean_score, confidence)
    return Uncertainty(
        confidence=confidence,
        n_eff=n_eff,
        chi_model_low=chi_low,
        chi_model_high=chi_high,
        concept_n_eff=concept_n_eff,
        X_model_n_eff=n_x,
        X_model_low=x_low,
        X_model_high=x_high,
        adjusted_gap=gap,
        adjusted_gap_low=gap_low,
        adjusted_gap_high=gap_high,
    )
