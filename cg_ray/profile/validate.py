"""`cg-ray validate`: does a weakness profile predict failures on rows it has not seen?

Rows are split into a fit and a test part, stratified by benchmark and seeded, whole row groups to one part
(`groups.grouped_split`: the groups of `groups.row_groups`, the run's own, so the answers to one question or the rows
of one template never sit on both sides; one evaluated model at a time: a file with several models needs
`--model`, as every CG command). The profile is built on the fit part only; on the test part we measure, for
the new ranking (the profile's order, near-duplicates merged), the paper's plain X_model ranking and random
eligible concepts:

- held-out lift at k = 1..max_k: over the test rows exhibiting (s̃ > 0) any of the top-k concepts, the mean
  score minus the benchmark-weighted mean (each row's benchmark mean on the test part), with a percentile
  bootstrap interval over those rows (negative: the profile finds rows the model fails more than its
  benchmarks' difficulty predicts);
- the low-performance curve (EvalTree's): for a profile of size M, P(M) = the mean over its concepts of the
  mean test score of each concept's rows; by size, curve(M') = min over M ≥ M' of P(M); by covered rows,
  curve(N') = min of P(M) over profiles whose concepts cover ≥ N' distinct test rows (lower is better).
  Intervals: percentile bootstrap over test rows (multinomial reweighting), the profile held fixed.
Random concepts: `n_random` random orders of the eligible concepts; the mean and the 2.5–97.5 percentiles.

The findings beyond the metadata (failure modes, slices, concepts) are not rebuilt on this split: the
`beyond` block is the run's own judgement of the same rows (`validate_findings`: read from the run, or made).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse, stats

from cg_ray.config import MetricsConfig
from cg_ray.errors import ConfigError, InputError
from cg_ray.metrics.compute import CGResult, compute_metrics
from cg_ray.metrics.robustness import RowTable
from cg_ray.profile.grouping import pool_activity_from_csr
from cg_ray.profile.groups import RowGroups, group_strata, grouped_split
from cg_ray.profile.ranking import eligible, weakness_order
from cg_ray.profile.weaknesses import POOL_FACTOR, profile_entries

# 2: the `beyond` block (slices, failure modes, residual lift on the fit / test split); 3: null_check;
# 4: the split keeps row groups whole; `beyond` is the run's own judgement (its confirmed failure modes, slices
# and concepts, the judgement summary) instead of modes rebuilt on the fit part and residual-lift curves; the
# null check permutes whole groups' blocks within cells and counts slices beyond the adjusted fields too.
FORMAT_VERSION = 5  # 5: `beyond` names its residuals heldout_residual / in_sample_residual
MIN_ROWS_PER_BENCHMARK = 10

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ValidateConfig:
    test_fraction: float = 0.2
    seed: int = 0
    max_k: int = 20  # lift for k = 1..max_k
    n_bootstrap: int = 1000
    n_random: int = 200
    covered_rows: tuple[int, ...] = (50, 100, 200, 500)
    confidence: float = 0.95
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    def __post_init__(self) -> None:
        if not 0.0 < self.test_fraction < 1.0:
            raise ConfigError(f"--test-fraction must be strictly between 0 and 1, got {self.test_fraction}")

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["metrics"] = self.metrics.model_dump()
        out["covered_rows"] = list(self.covered_rows)
        return out


def check_rows(table: RowTable, cfg: ValidateConfig, groups: RowGroups | None = None) -> None:
    """Every row scored; every benchmark large enough for both parts, with at least two groups of its own.
    Errors name the benchmark."""
    home = group_strata(table.benchmark_codes, groups.codes) if groups is not None else None
    for b, name in enumerate(table.benchmark_names):
        mine = table.benchmark_codes == b
        unscored = int(np.isnan(table.scores[mine]).sum())
        if unscored:
            raise InputError(
                f"benchmark {name!r} has {unscored} rows without a score; validate needs a score on every row "
                "(drop or score them first)",
                field="score",
            )
        n = int(mine.sum())
        n_test = round(cfg.test_fraction * n)
        if n < MIN_ROWS_PER_BENCHMARK or n_test < 1 or n - n_test < 1:
            raise InputError(
                f"benchmark {name!r} has {n} rows: too few to split at --test-fraction {cfg.test_fraction} "
                f"(validate needs at least {MIN_ROWS_PER_BENCHMARK} rows per benchmark and one in each part)",
                field="benchmark",
            )
        if groups is not None and home is not None:
            own = int(np.count_nonzero(home[np.unique(groups.codes[mine])] == b))
            if own < 2:
                raise InputError(
                    f"benchmark {name!r} has its {n} rows in {own} group{'' if own == 1 else 's'} of its own "
                    f"(groups by {groups.rule}): validate keeps a group's rows in one part, so it needs at least "
                    "2 groups per benchmark",
                    field="group",
                )


def subset(table: RowTable, rows: IntArray) -> RowTable:
    lengths = np.diff(table.offsets)[rows]
    starts = table.offsets[rows]
    elem = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())
    return RowTable(
        d_sae=table.d_sae,
        benchmark_names=table.benchmark_names,
        benchmark_codes=table.benchmark_codes[rows],
        scores=table.scores[rows],
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        concept_ids=table.concept_ids[elem],
        concept_acts=table.concept_acts[elem],
    )


def new_ranking(result: CGResult, fit: RowTable, size: int) -> list[int]:
    """The profile's order on the fit part: near-duplicates merged, representatives in rank order."""
    order = weakness_order(result)
    pool = order[: POOL_FACTOR * size]
    activity = pool_activity_from_csr(fit.offsets, fit.concept_ids, fit.concept_acts, pool.tolist(), fit.d_sae)
    entries = profile_entries(order, activity, result.uncertainty.concept_n_eff, size, result.config.duplicate_jaccard)
    return [e.concept for e in entries]


def paper_ranking(result: CGResult, size: int) -> list[int]:
    """The paper's plain ranking: X_model ascending over the same eligible concepts."""
    return [int(c) for c in weakness_order(result, "x_model")[:size]]


@dataclass
class TestPart:
    """The test rows as a rows × concepts incidence (s̃ > 0), scores and benchmark means."""

    scores: FloatArray
    residual: FloatArray  # score − its benchmark's test mean
    incidence: sparse.csc_matrix  # rows × d_sae, 1 where the row exhibits the concept

    @classmethod
    def of(cls, test: RowTable) -> TestPart:
        codes = test.benchmark_codes
        means = np.bincount(codes, weights=test.scores, minlength=len(test.benchmark_names)) / np.maximum(
            np.bincount(codes, minlength=len(test.benchmark_names)), 1
        )
        row_of = np.repeat(np.arange(test.n_rows), np.diff(test.offsets))
        active = test.concept_acts > 0
        inc = sparse.csc_matrix(
            (np.ones(int(active.sum())), (row_of[active], test.concept_ids[active].astype(np.int64))),
            shape=(test.n_rows, test.d_sae),
        )
        return cls(test.scores, test.scores - means[codes], inc)

    def covered(self, concepts: Sequence[int]) -> npt.NDArray[np.bool_]:
        if not concepts:
            return np.zeros(self.scores.size, dtype=bool)
        return np.asarray(self.incidence[:, list(concepts)].sum(axis=1)).ravel() > 0


def _bootstrap_mean(x: FloatArray, cfg: ValidateConfig, seed: int) -> tuple[float | None, float | None]:
    if x.size < 2 or np.all(x == x[0]):
        value = float(x[0]) if x.size else None
        return value, value
    res = stats.bootstrap(
        (x,),
        np.mean,
        n_resamples=cfg.n_bootstrap,
        confidence_level=cfg.confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def lift_curve(
    part: TestPart, concepts: Sequence[int], cfg: ValidateConfig, with_intervals: bool = True
) -> list[dict[str, Any]]:
    out = []
    for k in range(1, min(cfg.max_k, len(concepts)) + 1):
        rows = part.covered(concepts[:k])
        n = int(rows.sum())
        entry: dict[str, Any] = {"k": k, "n_rows": n, "mean_score": None, "expected": None, "lift": None}
        if n:
            diff = part.residual[rows]
            entry |= {
                "mean_score": float(part.scores[rows].mean()),
                "expected": float((part.scores[rows] - diff).mean()),
                "lift": float(diff.mean()),
            }
            if with_intervals:
                entry["low"], entry["high"] = _bootstrap_mean(diff, cfg, cfg.seed + k)
        out.append(entry)
    return out


def _profile_means(concept_sums: FloatArray, concept_counts: FloatArray) -> FloatArray:
    """P(M) for M = 1..K along the last axis: mean over the first M concepts of their mean test score."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_concept = np.where(concept_counts > 0, concept_sums / concept_counts, np.nan)
    defined = ~np.isnan(per_concept)
    cum = np.cumsum(np.where(defined, per_concept, 0.0), axis=-1)
    n = np.cumsum(defined, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, cum / np.maximum(n, 1), np.nan)


def _curves(
    p: FloatArray, coverage: IntArray, sizes: int, covered_rows: Sequence[int]
) -> tuple[FloatArray, FloatArray]:
    """(by size M' = 1..sizes, by covered rows N') from P(M) along the last axis."""
    filled = np.where(np.isnan(p), np.inf, p)
    suffix_min = np.minimum.accumulate(filled[..., ::-1], axis=-1)[..., ::-1][..., :sizes]
    by_size = np.where(np.isinf(suffix_min), np.nan, suffix_min)
    by_rows = []
    for n_rows in covered_rows:
        ok = coverage >= n_rows
        v = np.where(ok, filled, np.inf).min(axis=-1) if ok.any() else np.full(p.shape[:-1], np.inf)
        by_rows.append(np.where(np.isinf(v), np.nan, v))
    return by_size, np.stack(by_rows, axis=-1)


def low_performance(
    part: TestPart, concepts: Sequence[int], cfg: ValidateConfig, with_intervals: bool = True
) -> dict[str, Any]:
    k = len(concepts)
    empty: dict[str, Any] = {"by_size": [], "by_rows": []}
    if not k:
        return empty
    inc = part.incidence[:, list(concepts)]
    coverage = np.array([int(part.covered(concepts[: m + 1]).sum()) for m in range(k)])
    p = _profile_means(inc.T @ part.scores, np.asarray(inc.sum(axis=0)).ravel())
    by_size, by_rows = _curves(p, coverage, k, cfg.covered_rows)
    if with_intervals:
        rng = np.random.default_rng(cfg.seed)
        n = part.scores.size
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=cfg.n_bootstrap).astype(np.float64)
        sums = (inc.T @ (weights * part.scores).T).T
        counts = (inc.T @ weights.T).T
        boot_size, boot_rows = _curves(_profile_means(sums, counts), coverage, k, cfg.covered_rows)
        alpha = (1 - cfg.confidence) / 2
        with warnings.catch_warnings():  # all-NaN columns (a size no resample reaches) stay NaN → null
            warnings.simplefilter("ignore", RuntimeWarning)
            size_lo, size_hi = np.nanquantile(boot_size, [alpha, 1 - alpha], axis=0)
            rows_lo, rows_hi = np.nanquantile(boot_rows, [alpha, 1 - alpha], axis=0)
    else:
        size_lo = size_hi = np.full(by_size.shape, np.nan)
        rows_lo = rows_hi = np.full(by_rows.shape, np.nan)
    return {
        "by_size": [
            {"M": m + 1, "value": _num(by_size[m]), "low": _num(size_lo[m]), "high": _num(size_hi[m])} for m in range(k)
        ],
        "by_rows": [
            {"N": n_rows, "value": _num(by_rows[i]), "low": _num(rows_lo[i]), "high": _num(rows_hi[i])}
            for i, n_rows in enumerate(cfg.covered_rows)
        ],
    }


def _num(x: float | np.floating) -> float | None:
    f = float(x)
    return f if np.isfinite(f) else None


def random_baseline(part: TestPart, pool: IntArray, size: int, cfg: ValidateConfig) -> dict[str, Any]:
    """n_random random orders of the eligible concepts: the mean curve and its 2.5–97.5 percentiles."""
    rng = np.random.default_rng(cfg.seed + 1)
    lifts, sizes, rows = [], [], []
    for _ in range(cfg.n_random):
        concepts = [int(c) for c in rng.permutation(pool)[:size]]
        lifts.append([e["lift"] for e in lift_curve(part, concepts, cfg, with_intervals=False)])
        lp = low_performance(part, concepts, cfg, with_intervals=False)
        sizes.append([e["value"] for e in lp["by_size"]])
        rows.append([e["value"] for e in lp["by_rows"]])

    n_k = min(cfg.max_k, size, pool.size)
    n_m = min(size, pool.size)
    return {
        "n_draws": cfg.n_random,
        "lift": draw_summary(lifts, "k", list(range(1, n_k + 1))),
        "low_performance": {
            "by_size": draw_summary(sizes, "M", list(range(1, n_m + 1))),
            "by_rows": draw_summary(rows, "N", list(cfg.covered_rows)),
        },
    }


def draw_summary(values: Sequence[Sequence[float | None]], key: str, labels: Sequence[int]) -> list[dict[str, Any]]:
    """Per position along the draws' curves: the mean over the draws and their 2.5–97.5 percentiles (a
    position no draw reaches, or one all draws leave undefined, gets nulls)."""
    arr = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=np.float64)
    out = []
    for j, label in enumerate(labels):
        col = arr[:, j][~np.isnan(arr[:, j])] if arr.ndim == 2 and j < arr.shape[1] else np.zeros(0)
        out.append(
            {
                key: label,
                "value": float(col.mean()) if col.size else None,
                "low": float(np.quantile(col, 0.025)) if col.size else None,
                "high": float(np.quantile(col, 0.975)) if col.size else None,
            }
        )
    return out


def planted_recovery(found: Sequence[int], planted: set[int]) -> dict[str, float]:
    """Precision, recall and F1 of `found` against the planted concepts that could be found."""
    hits = len(set(found) & planted)
    precision = hits / len(found) if found else 0.0
    recall = hits / len(planted) if planted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "n_found": len(found), "n_planted": len(planted)}


def validate(
    table: RowTable,
    strata: npt.NDArray[np.integer],
    cfg: ValidateConfig,
    groups: RowGroups | None = None,
    beyond: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole evaluation (see the module doc); a JSON-ready dict with the documented keys. `groups`: the
    rows' groups, kept whole by the split (None: one row a group); `beyond`: the run's own judgement of the
    same rows as `validate_findings` lays it out, reported as it is."""
    codes = groups.codes if groups is not None else np.arange(table.n_rows, dtype=np.int64)
    if codes.size != table.n_rows:
        raise ValueError(f"{codes.size} group codes for {table.n_rows} rows")
    check_rows(table, cfg, groups)
    test_mask = grouped_split(strata, codes, cfg.test_fraction, cfg.seed)
    fit = subset(table, np.flatnonzero(~test_mask))
    test = subset(table, np.flatnonzero(test_mask))
    result = compute_metrics(fit.accumulate(), cfg.metrics)
    size = cfg.metrics.top_k
    rankings = {"new": new_ranking(result, fit, size), "paper": paper_ranking(result, size)}
    part = TestPart.of(test)
    pool = np.flatnonzero(eligible(result))
    split_rows = []
    for s in np.unique(strata):
        mine = strata == s
        b = int(np.unique(table.benchmark_codes[mine])[0])
        split_rows.append(
            {
                "benchmark": table.benchmark_names[b],
                "n_fit": int((mine & ~test_mask).sum()),
                "n_test": int((mine & test_mask).sum()),
                "n_groups_fit": int(np.unique(codes[mine & ~test_mask]).size),
                "n_groups_test": int(np.unique(codes[mine & test_mask]).size),
            }
        )
    return {
        "format_version": FORMAT_VERSION,
        "ranking": cfg.metrics.rank_by,
        "beyond": beyond,
        "lift": lift_curve(part, rankings["new"], cfg),
        "low_performance": low_performance(part, rankings["new"], cfg),
        "baselines": {
            "paper": {
                "ranking": "x_model",
                "lift": lift_curve(part, rankings["paper"], cfg),
                "low_performance": low_performance(part, rankings["paper"], cfg),
            },
            "random": random_baseline(part, pool, size, cfg),
        },
        "split": {
            "seed": cfg.seed,
            "test_fraction": cfg.test_fraction,
            "stratified_by": "benchmark",
            "groups": {
                "rule": groups.rule if groups is not None else "one row each",
                "n_groups": int(np.unique(codes).size),
            },
            "n_fit": int(fit.n_rows),
            "n_test": int(test.n_rows),
            "strata": split_rows,
        },
        "profile": {"new": rankings["new"], "paper": rankings["paper"], "n_eligible": int(pool.size)},
        "config": cfg.as_dict(),
    }
