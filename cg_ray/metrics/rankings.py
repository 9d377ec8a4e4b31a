"""Best / worst concepts by X_model and most / least covered by X_bench, with the paper's filters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cg_ray.metrics.compute import CGResult


@dataclass(frozen=True)
class Rankings:
    eligible: npt.NDArray[np.bool_]  # concepts passing the filters
    best_model: list[int]  # highest X_model first
    worst_model: list[int]  # lowest X_model first
    most_covered: list[int]  # highest X_bench first
    least_covered: list[int]  # lowest non-missing X_bench first

    def as_dict(self) -> dict[str, list[int] | int]:
        return {
            "n_eligible": int(self.eligible.sum()),
            "best_model": self.best_model,
            "worst_model": self.worst_model,
            "most_covered": self.most_covered,
            "least_covered": self.least_covered,
        }


def _ordered(
    values: npt.NDArray[np.float64],
    support: npt.NDArray[np.int64],
    mask: npt.NDArray[np.bool_],
    k: int,
    descending: bool,
) -> list[int]:
    idx = np.flatnonzero(mask)
    # Ties (many concepts sit at X_model 0 on small suites) go to the concept active in more rows: the same
    # value on more rows is more evidence, and an id order would tell the reader nothing. Then by id, so
    # rankings are reproducible.
    key = -values[idx] if descending else values[idx]
    order = np.lexsort((idx, -support[idx], key))
    return [int(i) for i in idx[order[:k]]]


def rank_concepts(result: CGResult, top_k: int | None = None) -> Rankings:
    cfg = result.config
    k = top_k or cfg.top_k
    eligible = (result.n_benchmarks_active >= cfg.min_benchmarks) & (result.n_active_rows >= cfg.min_rows)
    scored = eligible & ~np.isnan(result.X_model)
    present = eligible & (result.X_bench >= cfg.epsilon)
    support = result.n_active_rows
    return Rankings(
        eligible=eligible,
        best_model=_ordered(result.X_model, support, scored, k, descending=True),
        worst_model=_ordered(result.X_model, support, scored, k, descending=False),
        most_covered=_ordered(result.X_bench, support, present, k, descending=True),
        least_covered=_ordered(result.X_bench, support, present, k, descending=False),
    )
