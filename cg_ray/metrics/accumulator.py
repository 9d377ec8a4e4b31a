"""Streaming, mergeable per-benchmark sums: everything the CG formulas need, in O(benchmarks × d_sae).

A batch of rows arrives in CSR form (offsets into flat concept ids / activations), the way Arrow stores
`list<int32>` / `list<float32>` columns, so no per-row Python work is done. Sums are float64.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass
class BenchmarkSums:
    """The additive sufficient statistics of one benchmark.

    Rows without a score (coverage only) count in `act_sum` but not in the score-weighted sums, so
    χ_model uses exactly the rows the model was scored on.
    """

    d_sae: int
    n_rows: int = 0
    n_scored_rows: int = 0
    score_sum: float = 0.0
    act_sum: FloatArray = field(init=False)  # Σ_i s̃_{c,i}, all rows
    scored_act_sum: FloatArray = field(init=False)  # Σ_i s̃_{c,i}, scored rows
    weighted_sum: FloatArray = field(init=False)  # Σ_i m(i) s̃_{c,i}, scored rows
    scored_act_sq_sum: FloatArray = field(init=False)  # Σ_i s̃_{c,i}², scored rows (effective support)
    active_rows: IntArray = field(init=False)  # #rows with s̃_{c,i} > 0
    scored_active_rows: IntArray = field(init=False)  # #scored rows with s̃_{c,i} > 0

    def __post_init__(self) -> None:
        d = self.d_sae
        self.act_sum = np.zeros(d)
        self.scored_act_sum = np.zeros(d)
        self.weighted_sum = np.zeros(d)
        self.scored_act_sq_sum = np.zeros(d)
        self.active_rows = np.zeros(d, dtype=np.int64)
        self.scored_active_rows = np.zeros(d, dtype=np.int64)

    _ARRAYS = (
        "act_sum",
        "scored_act_sum",
        "weighted_sum",
        "scored_act_sq_sum",
        "active_rows",
        "scored_active_rows",
    )

    def merge(self, other: BenchmarkSums) -> None:
        if other.d_sae != self.d_sae:
            raise ValueError(f"cannot merge sums of d_sae {other.d_sae} into d_sae {self.d_sae}")
        self.n_rows += other.n_rows
        self.n_scored_rows += other.n_scored_rows
        self.score_sum += other.score_sum
        for name in self._ARRAYS:
            getattr(self, name).__iadd__(getattr(other, name))

    def copy(self) -> BenchmarkSums:
        out = BenchmarkSums(self.d_sae, self.n_rows, self.n_scored_rows, self.score_sum)
        for name in self._ARRAYS:
            setattr(out, name, getattr(self, name).copy())
        return out


class CGAccumulator:
    """Per-benchmark sums over any number of row batches; `merge` combines partial accumulators."""

    def __init__(self, d_sae: int) -> None:
        if d_sae <= 0:
            raise ValueError(f"d_sae must be positive, got {d_sae}")
        self.d_sae = d_sae
        self.benchmarks: dict[str, BenchmarkSums] = {}

    def _sums(self, name: str) -> BenchmarkSums:
        sums = self.benchmarks.get(name)
        if sums is None:
            sums = self.benchmarks[name] = BenchmarkSums(self.d_sae)
        return sums

    @property
    def n_rows(self) -> int:
        return sum(s.n_rows for s in self.benchmarks.values())

    def add_batch(
        self,
        benchmark_codes: npt.NDArray[np.integer],
        benchmark_names: Sequence[str],
        scores: FloatArray,
        offsets: npt.NDArray[np.integer],
        concept_ids: npt.NDArray[np.integer],
        concept_acts: npt.NDArray[np.floating],
    ) -> None:
        """Add rows given as CSR: row r owns ids/acts[offsets[r]:offsets[r+1]].

        `benchmark_codes[r]` indexes `benchmark_names`; `scores[r]` is NaN for an unscored row.
        Inputs are assumed validated (ids in range, acts ≥ 0, no duplicate ids within a row).
        """
        n_rows = len(scores)
        if n_rows == 0:
            return
        d = self.d_sae
        n_bench = len(benchmark_names)
        codes = np.asarray(benchmark_codes, dtype=np.int64)
        offsets = np.asarray(offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        ids = np.asarray(concept_ids)[offsets[0] : offsets[-1]].astype(np.int64, copy=False)
        acts = np.asarray(concept_acts)[offsets[0] : offsets[-1]]

        scored = ~np.isnan(scores)
        elem_code = np.repeat(codes, lengths)
        # One flat bincount over (benchmark, concept) cells; single-benchmark batches skip the offset.
        flat = ids if n_bench == 1 else elem_code * d + ids
        size = n_bench * d

        def scatter(
            weights: npt.NDArray[np.floating] | None, where: npt.NDArray[np.bool_] | None = None
        ) -> np.ndarray:  # float64 sums with weights, counts without
            idx = flat if where is None else flat[where]
            if weights is not None and where is not None:
                weights = weights[where]
            out = np.bincount(idx, weights=weights, minlength=size)
            return out.reshape(n_bench, d)

        positive = acts > 0
        act_sum = scatter(acts)
        active = scatter(None, positive)
        if scored.all():
            scored_act_sum, scored_active = act_sum, active
            weighted = scatter(acts * np.repeat(scores, lengths))
            squared = scatter(np.square(acts, dtype=np.float64))
        elif scored.any():
            elem_scored = np.repeat(scored, lengths)
            scored_act_sum = scatter(acts, elem_scored)
            scored_active = scatter(None, elem_scored & positive)
            weighted = scatter(acts * np.repeat(np.nan_to_num(scores), lengths), elem_scored)
            squared = scatter(np.square(acts, dtype=np.float64), elem_scored)
        else:
            scored_act_sum = weighted = squared = np.zeros((n_bench, d))
            scored_active = np.zeros((n_bench, d), dtype=np.int64)

        rows_per_bench = np.bincount(codes, minlength=n_bench)
        scored_per_bench = np.bincount(codes[scored], minlength=n_bench)
        score_sum_per_bench = np.bincount(codes[scored], weights=scores[scored], minlength=n_bench)
        for b, name in enumerate(benchmark_names):
            if rows_per_bench[b] == 0:
                continue
            sums = self._sums(name)
            sums.n_rows += int(rows_per_bench[b])
            sums.n_scored_rows += int(scored_per_bench[b])
            sums.score_sum += float(score_sum_per_bench[b])
            sums.act_sum += act_sum[b]
            sums.scored_act_sum += scored_act_sum[b]
            sums.weighted_sum += weighted[b]
            sums.scored_act_sq_sum += squared[b]
            sums.active_rows += active[b]
            sums.scored_active_rows += scored_active[b]

    def merge(self, other: CGAccumulator) -> CGAccumulator:
        """Add `other`'s sums into this accumulator (in place) and return it."""
        if other.d_sae != self.d_sae:
            raise ValueError(f"cannot merge an accumulator of d_sae {other.d_sae} into d_sae {self.d_sae}")
        for name, sums in other.benchmarks.items():
            self._sums(name).merge(sums)
        return self

    @classmethod
    def merged(cls, parts: Iterable[CGAccumulator], d_sae: int) -> CGAccumulator:
        out = cls(d_sae)
        for part in parts:
            out.merge(part)
        return out

    def restricted(self, names: Iterable[str]) -> CGAccumulator:
        """A copy holding only the named benchmarks (e.g. for a coverage comparison of a subset)."""
        out = CGAccumulator(self.d_sae)
        for name in names:
            out.benchmarks[name] = self.benchmarks[name].copy()
        return out

    def stacked(self) -> tuple[list[str], Mapping[str, np.ndarray]]:
        """Benchmarks in sorted order and each statistic stacked as a (benchmarks × d_sae) array."""
        names = sorted(self.benchmarks)
        arrays = {
            attr: np.stack([getattr(self.benchmarks[n], attr) for n in names]) if names else np.zeros((0, self.d_sae))
            for attr in BenchmarkSums._ARRAYS
        }
        return names, arrays
