"""Near-duplicate concepts: which candidates' active-row sets nearly coincide, and who represents them.

A row *exhibits* a concept when s̃ > 0 (the paper's sense of active). Two concepts are near-duplicates when
the Jaccard index of their active-row sets is at least `threshold` (default 0.8). Only a bounded pool of
candidates is ever compared (the head of a ranking), and their co-occurrence counts are accumulated batch by
batch, so memory is O(pool² + pool × examples), never O(rows × d_sae) nor O(rows × pool).

Grouping is greedy, in order of decreasing effective support: each concept joins the first representative
(best-supported first) whose active-row set it nearly coincides with, or becomes a representative itself.
So every member is a near-duplicate of its representative, and the representative is the best-supported
concept of its group.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from scipy import sparse

from cg_ray.artifacts.rows import RowsFile, iter_row_batches

DEFAULT_JACCARD = 0.8
EXAMPLE_ROWS = 5


def top_per_group(
    groups: npt.NDArray[np.int64], keys: npt.NDArray[np.floating], k: int, tiebreak: np.ndarray | None = None
) -> npt.NDArray[np.int64]:
    """Indices of the k largest keys of each group (ties: smaller `tiebreak` first, else input order)."""
    order = np.lexsort((-keys, groups) if tiebreak is None else (tiebreak, -keys, groups))
    first = np.searchsorted(groups[order], groups[order], side="left")
    kept: npt.NDArray[np.int64] = order[np.arange(order.size) - first < k]
    return kept


class PoolActivity:
    """Streaming statistics of a pool of concepts' active rows (s̃ > 0), in O(pool² + pool × examples):

    `inter[i, j]` = number of rows exhibiting both pool concepts i and j (the diagonal: each one's rows), and
    the `examples` rows with the largest s̃ of each concept (their row_ids, when rows carry ids).
    """

    def __init__(self, pool: Sequence[int], d_sae: int, examples: int = EXAMPLE_ROWS) -> None:
        self.pool = np.asarray(pool, dtype=np.int64)
        self.slot_of = np.full(d_sae, -1, dtype=np.int64)
        self.slot_of[self.pool] = np.arange(self.pool.size)
        self.inter = np.zeros((self.pool.size, self.pool.size), dtype=np.int64)
        self.examples = examples
        self._top_slot = np.zeros(0, dtype=np.int64)
        self._top_act = np.zeros(0, dtype=np.float32)
        self._top_id = np.zeros(0, dtype=object)
        self.n_rows = 0

    def add(
        self,
        offsets: npt.NDArray[np.int64],
        concept_ids: npt.NDArray[np.integer],
        concept_acts: npt.NDArray[np.floating],
        row_ids: pa.Array | None = None,
    ) -> None:
        """Add rows given as CSR (offsets start at 0)."""
        n = len(offsets) - 1
        slots = self.slot_of[concept_ids]
        hit = (slots >= 0) & (np.asarray(concept_acts) > 0)
        if hit.any():
            rows = np.repeat(np.arange(n), np.diff(offsets))[hit]
            a = sparse.csr_matrix((np.ones(rows.size), (rows, slots[hit])), shape=(n, self.pool.size))
            self.inter += np.rint((a.T @ a).toarray()).astype(np.int64)
            if row_ids is not None and self.examples:
                self._keep_top(slots[hit], np.asarray(concept_acts)[hit].astype(np.float32), row_ids, rows)
        self.n_rows += n

    def _keep_top(self, slots: np.ndarray, acts: np.ndarray, row_ids: pa.Array, rows: np.ndarray) -> None:
        # Candidates: the current tops and this batch's active elements; keep the largest s̃ per concept.
        keep = top_per_group(slots, acts, self.examples)
        ids = np.asarray(row_ids.take(pa.array(rows[keep])).cast(pa.string()).to_pylist(), dtype=object)
        slot = np.concatenate([self._top_slot, slots[keep]])
        act = np.concatenate([self._top_act, acts[keep]])
        rid = np.concatenate([self._top_id, ids])
        keep = top_per_group(slot, act, self.examples)
        self._top_slot, self._top_act, self._top_id = slot[keep], act[keep], rid[keep]

    def example_row_ids(self, concept: int) -> list[str]:
        """row_ids of the rows where `concept` is most salient (largest s̃), largest first."""
        slot = int(self.slot_of[concept]) if 0 <= concept < self.slot_of.size else -1
        if slot < 0:
            return []
        sel = np.flatnonzero(self._top_slot == slot)
        sel = sel[np.argsort(-self._top_act[sel], kind="stable")]
        return [str(x) for x in self._top_id[sel]]

    def jaccard(self, concepts: Sequence[int]) -> npt.NDArray[np.float64]:
        """Jaccard index of the active-row sets of the given pool concepts (1 on the diagonal)."""
        idx = self.slot_of[np.asarray(concepts, dtype=np.int64)]
        if (idx < 0).any():
            raise ValueError("jaccard of concepts outside the pool")
        return jaccard_from_counts(self.inter[np.ix_(idx, idx)])


def jaccard_from_counts(inter: npt.NDArray[np.integer]) -> npt.NDArray[np.float64]:
    """Pairwise Jaccard of active-row sets from their intersection counts (diagonal: each one's rows); 1 on the
    diagonal, 0 between two empty sets."""
    counts = inter.astype(np.float64)
    size = np.diag(counts).copy()
    union = size[:, None] + size[None, :] - counts
    with np.errstate(divide="ignore", invalid="ignore"):
        out: npt.NDArray[np.float64] = np.where(union > 0, counts / union, 0.0)
    np.fill_diagonal(out, 1.0)
    return out


def pool_activity_from_rows(rows: RowsFile, pool: Sequence[int], model: str | None = None) -> PoolActivity:
    """One streaming pass over rows.parquet (the rows of `model` when given)."""
    activity = PoolActivity(pool, rows.d_sae)
    for batch in iter_row_batches(rows, model=model):
        activity.add(batch.offsets, batch.concept_ids, batch.concept_acts, batch.row_ids)
    return activity


def pool_activity_from_csr(
    offsets: npt.NDArray[np.int64],
    concept_ids: npt.NDArray[np.integer],
    concept_acts: npt.NDArray[np.floating],
    pool: Sequence[int],
    d_sae: int,
) -> PoolActivity:
    """The same from rows already in memory as CSR (e.g. one split of `cg-ray validate`), without examples."""
    activity = PoolActivity(pool, d_sae, examples=0)
    activity.add(np.asarray(offsets, dtype=np.int64), concept_ids, concept_acts)
    return activity


def group_near_duplicates(
    similarity: npt.NDArray[np.float64], support: npt.NDArray[np.float64], threshold: float = DEFAULT_JACCARD
) -> npt.NDArray[np.int64]:
    """For each pool slot, the slot of its representative (itself when it represents a group)."""
    n = similarity.shape[0]
    order = np.lexsort((np.arange(n), -np.nan_to_num(support, nan=-1.0)))  # best-supported first, then pool order
    rep = np.full(n, -1, dtype=np.int64)
    reps: list[int] = []
    for i in order:
        for r in reps:
            if similarity[i, r] >= threshold:
                rep[i] = r
                break
        else:
            rep[i] = i
            reps.append(int(i))
    return rep
