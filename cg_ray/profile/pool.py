"""The activations of a pool of concepts on every row, gathered in one pass over rows.parquet: the concepts
any split may test or build a failure mode from (`verdicts.concept_candidates`), so no split re-reads the rows.
The firing rule itself is `metrics.firing`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt
from scipy import sparse

from cg_ray.arrays import FloatArray, IntArray
from cg_ray.metrics.firing import firing


class PoolRows:
    """The activations s̃ of a pool of concepts on every row (rows × pool, sparse by column), gathered in one
    pass: memory O(the pool's active rows), never O(rows × d_sae)."""

    def __init__(self, pool: Iterable[int], d_sae: int) -> None:
        self.pool = np.asarray(sorted(set(int(c) for c in pool)), dtype=np.int64)
        self.slot_of = np.full(d_sae, -1, dtype=np.int64)
        self.slot_of[self.pool] = np.arange(self.pool.size)
        self._rows: list[IntArray] = []
        self._slots: list[IntArray] = []
        self._acts: list[npt.NDArray[np.float32]] = []
        self.n_rows = 0
        self.matrix = sparse.csc_matrix((0, self.pool.size))
        self.fires = sparse.csc_matrix((0, self.pool.size))
        self.threshold = np.zeros(self.pool.size)

    def add(
        self, offsets: IntArray, concept_ids: npt.NDArray[np.integer], concept_acts: npt.NDArray[np.floating]
    ) -> None:
        n = len(offsets) - 1
        slots = self.slot_of[np.asarray(concept_ids, dtype=np.int64)]
        acts = np.asarray(concept_acts)
        hit = (slots >= 0) & (acts > 0)
        if hit.any():
            self._rows.append(self.n_rows + np.repeat(np.arange(n), np.diff(offsets))[hit])
            self._slots.append(slots[hit])
            self._acts.append(acts[hit].astype(np.float32))
        self.n_rows += n

    def finish(self) -> PoolRows:
        cat = lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt)  # noqa: E731
        rows, slots, acts = cat(self._rows, np.int64), cat(self._slots, np.int64), cat(self._acts, np.float32)
        self.matrix = sparse.csc_matrix((acts, (rows, slots)), shape=(self.n_rows, self.pool.size))
        self.matrix.sort_indices()
        self._rows, self._slots, self._acts = [], [], []
        self.threshold, self.fires = firing(self.matrix)
        return self

    def concept(self, c: int) -> tuple[IntArray, FloatArray]:
        """(row positions, s̃) of one pool concept, rows ascending."""
        s = int(self.slot_of[c])
        lo, hi = self.matrix.indptr[s], self.matrix.indptr[s + 1]
        return self.matrix.indices[lo:hi].astype(np.int64), self.matrix.data[lo:hi].astype(np.float64)

    def firing(self, c: int) -> tuple[IntArray, FloatArray]:
        """(row positions, s̃) of the rows where a pool concept fires (`FIRING_SHARE`), rows ascending."""
        s = int(self.slot_of[c])
        lo, hi = self.fires.indptr[s], self.fires.indptr[s + 1]
        return self.fires.indices[lo:hi].astype(np.int64), self.fires.data[lo:hi].astype(np.float64)

    def firing_thresholds(self, concepts: Sequence[int]) -> list[float]:
        return [float(self.threshold[self.slot_of[c]]) for c in concepts]

    def members(self, concepts: Sequence[int]) -> tuple[IntArray, FloatArray]:
        """(row positions, summed s̃) of the rows where any of the concepts fires: a failure mode's rule."""
        parts = [self.firing(c) for c in concepts]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0)
        rows = np.concatenate([p[0] for p in parts])
        acts = np.concatenate([p[1] for p in parts])
        uniq, inverse = np.unique(rows, return_inverse=True)
        summed: FloatArray = np.bincount(inverse, weights=acts, minlength=uniq.size).astype(np.float64)
        return uniq.astype(np.int64), summed

    def intersections(self, concepts: Sequence[int]) -> IntArray:
        """Rows where each pair of the concepts fires (the diagonal: each one's rows)."""
        cols = self.fires[:, self.slot_of[np.asarray(concepts, dtype=np.int64)]]
        b = (cols > 0).astype(np.float64)
        out: IntArray = np.rint((b.T @ b).toarray()).astype(np.int64)
        return out
