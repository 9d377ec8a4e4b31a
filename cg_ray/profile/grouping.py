"""Near-duplicate concepts: which candidates' active-row sets nearly coincide, and who represents them.

A row *exhibits* a concept when s̃ > 0 (the paper's sense of active). Two concepts are near-duplicates when
the Jaccard index of their active-row sets is at least `threshold` (default 0.8). Only a bounded pool of
candidates is ever compared (the head of a ranking), so memory is O(active elements of the pool + pool²),
never O(rows × d_sae).

Grouping is greedy, in order of decreasing effective support: each concept joins the first representative
(best-supported first) whose active-row set it nearly coincides with, or becomes a representative itself.
So every member is a near-duplicate of its representative, and the representative is the best-supported
concept of its group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from scipy import sparse

from cg_ray.artifacts.rows import RowsFile, iter_row_batches

DEFAULT_JACCARD = 0.8
EXAMPLE_ROWS = 5


@dataclass(frozen=True)
class PoolActivity:
    """The active elements (s̃ > 0) of a pool of concepts: parallel arrays over (row, concept) pairs."""

    pool: npt.NDArray[np.int64]  # concept ids, the pool's order
    rows: npt.NDArray[np.int64]  # row index (file order after any model filter)
    slots: npt.NDArray[np.int64]  # index into `pool`
    acts: npt.NDArray[np.float32]
    row_ids: pa.Array | None = None  # row_id of every row, when read from a file

    def incidence(self, n_rows: int) -> sparse.csc_matrix:
        """Binary rows × pool matrix of activity."""
        data = np.ones(self.rows.size, dtype=np.float64)
        return sparse.csc_matrix((data, (self.rows, self.slots)), shape=(n_rows, self.pool.size))

    def example_row_ids(self, concept: int, k: int = EXAMPLE_ROWS) -> list[str]:
        """row_ids of the k rows where `concept` is most salient (largest s̃), largest first."""
        if self.row_ids is None:
            return []
        slot = np.flatnonzero(self.pool == concept)
        if slot.size == 0:
            return []
        sel = np.flatnonzero(self.slots == slot[0])
        top = sel[np.argsort(-self.acts[sel], kind="stable")[:k]]
        return [str(self.row_ids[int(r)].as_py()) for r in self.rows[top]]


def _pool_index(pool: Sequence[int], d_sae: int) -> npt.NDArray[np.int64]:
    slot = np.full(d_sae, -1, dtype=np.int64)
    slot[np.asarray(pool, dtype=np.int64)] = np.arange(len(pool))
    return slot


def pool_activity_from_rows(rows: RowsFile, pool: Sequence[int], model: str | None = None) -> PoolActivity:
    """One streaming pass over rows.parquet, keeping only the pool's active elements and the row_ids."""
    slot_of = _pool_index(pool, rows.d_sae)
    found_rows, found_slots, found_acts, ids = [], [], [], []
    n_seen = 0
    for batch in iter_row_batches(rows, model=model):
        slots = slot_of[batch.concept_ids]
        hit = (slots >= 0) & (batch.concept_acts > 0)
        if hit.any():
            row_of = np.repeat(np.arange(len(batch)), np.diff(batch.offsets))
            found_rows.append(row_of[hit] + n_seen)
            found_slots.append(slots[hit])
            found_acts.append(batch.concept_acts[hit])
        ids.append(batch.row_ids)
        n_seen += len(batch)
    return PoolActivity(
        pool=np.asarray(pool, dtype=np.int64),
        rows=np.concatenate(found_rows) if found_rows else np.zeros(0, np.int64),
        slots=np.concatenate(found_slots) if found_slots else np.zeros(0, np.int64),
        acts=np.concatenate(found_acts) if found_acts else np.zeros(0, np.float32),
        row_ids=pa.concat_arrays([a.cast(pa.string()) for a in ids]) if ids else None,
    )


def pool_activity_from_csr(
    offsets: npt.NDArray[np.int64],
    concept_ids: npt.NDArray[np.integer],
    concept_acts: npt.NDArray[np.floating],
    pool: Sequence[int],
    d_sae: int,
) -> PoolActivity:
    """The same from rows already in memory as CSR (e.g. one split of `cg-ray validate`)."""
    slot_of = _pool_index(pool, d_sae)
    slots = slot_of[concept_ids]
    hit = (slots >= 0) & (concept_acts > 0)
    row_of = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return PoolActivity(
        pool=np.asarray(pool, dtype=np.int64),
        rows=row_of[hit].astype(np.int64),
        slots=slots[hit],
        acts=np.asarray(concept_acts)[hit].astype(np.float32),
    )


def jaccard(activity: PoolActivity, n_rows: int) -> npt.NDArray[np.float64]:
    """Pool × pool Jaccard index of active-row sets (1 on the diagonal; 0 for two empty sets)."""
    a = activity.incidence(n_rows)
    inter = (a.T @ a).toarray()
    size = np.diag(inter).copy()
    union = size[:, None] + size[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(union > 0, inter / union, 0.0)
    np.fill_diagonal(out, 1.0)
    return out


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
