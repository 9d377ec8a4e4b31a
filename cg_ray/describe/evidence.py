"""In-data evidence for a set of concepts, in one bounded-memory streaming pass over rows.parquet.

Per requested concept: the top-k rows by s̃ (with their scores), a uniform random sample of the other rows
that exhibit it (held out for detection scoring), the number of active rows and their mean score; per
metadata field and value, how many rows carry it and how many of those exhibit each concept; the
co-activation counts between requested concepts; and a uniform random sample of all rows (negatives for
detection). The state is O(concepts × (k + sample) + concepts² + fields × values × concepts + background
× concepts), whatever the number of rows: top-k lists are merged batch by batch, and the random samples
keep the smallest of a seeded uniform key per item (bottom-k sampling, a uniform sample without
replacement).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.rows import DEFAULT_BATCH_ROWS, RowsFile, iter_row_batches
from cg_ray.errors import InputError
from cg_ray.profile.metadata import MetadataCoder


@dataclass
class TopK:
    """Per-group top-k of (group, key, row) triples by key (descending; ties by row, ascending)."""

    k: int
    group: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    key: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0, np.float64))
    row: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))

    def add(self, group: np.ndarray, key: np.ndarray, row: np.ndarray) -> None:
        g = np.concatenate([self.group, group.astype(np.int32)])
        kk = np.concatenate([self.key, key.astype(np.float64)])
        r = np.concatenate([self.row, row.astype(np.int64)])
        order = np.lexsort((r, -kk, g))
        g, kk, r = g[order], kk[order], r[order]
        if g.size:
            starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
            sizes = np.diff(np.r_[starts, g.size])
            rank = np.arange(g.size) - np.repeat(starts, sizes)
            keep = rank < self.k
            g, kk, r = g[keep], kk[keep], r[keep]
        self.group, self.key, self.row = g, kk, r

    def of(self, group: int) -> list[tuple[int, float]]:
        mask = self.group == group
        return [(int(r), float(v)) for r, v in zip(self.row[mask], self.key[mask], strict=True)]

    def __len__(self) -> int:
        return int(self.group.size)


@dataclass
class EvidenceState:
    """Everything the pass keeps; its size does not depend on the number of rows."""

    concept_ids: npt.NDArray[np.int32]  # sorted, unique
    top: TopK
    sample: TopK  # key = -uniform: the smallest uniforms win
    background_keys: npt.NDArray[np.float64]
    background_rows: npt.NDArray[np.int64]
    background_active: npt.NDArray[np.bool_]  # (background rows, concepts)
    n_active: npt.NDArray[np.int64]
    score_sum: npt.NDArray[np.float64]  # over active scored rows
    n_scored_active: npt.NDArray[np.int64]
    co_active: npt.NDArray[np.int64]  # (concepts, concepts)
    value_rows: dict[str, npt.NDArray[np.int64]]  # field → rows per value
    value_active: dict[str, npt.NDArray[np.int64]]  # field → (values, concepts) active rows per value
    n_rows: int = 0
    n_scored: int = 0
    score_total: float = 0.0

    def size(self) -> int:
        """Number of stored numbers (for the memory-bound test)."""
        arrays: list[np.ndarray] = [
            self.top.group, self.sample.group, self.background_rows, self.background_active,
            self.co_active, self.n_active, *self.value_rows.values(), *self.value_active.values(),
        ]  # fmt: skip
        return int(sum(a.size for a in arrays))


@dataclass(frozen=True)
class Evidence:
    concept_ids: list[int]
    top: dict[int, list[tuple[int, float]]]  # concept → [(file row, s̃)], best first
    sample: dict[int, list[int]]  # concept → file rows exhibiting it, a uniform random sample
    background: list[tuple[int, frozenset[int]]]  # (file row, requested concepts active in it)
    n_active: dict[int, int]
    mean_score_active: dict[int, float | None]
    co_active: npt.NDArray[np.int64]  # in the order of concept_ids
    value_rows: dict[str, dict[str, int]]  # field → value → rows carrying it
    value_active: dict[str, dict[str, npt.NDArray[np.int64]]]  # field → value → active rows per concept
    skipped_fields: dict[str, str]
    n_rows: int
    mean_score: float | None
    state_size: int


def _iter_metadata(rows: RowsFile, batch_rows: int) -> Iterator[list[str | None]]:
    """The metadata column in the same batches as `iter_row_batches` (one row group at a time)."""
    pf = rows.parquet
    for group in range(pf.num_row_groups):
        for rb in pf.iter_batches(batch_size=batch_rows, columns=[S.METADATA], row_groups=[group]):
            yield rb.column(0).to_pylist()


def scan(
    rows: RowsFile,
    concept_ids: Sequence[int],
    *,
    k: int = 10,
    sample: int = 20,
    background: int = 200,
    seed: int = 0,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    max_values: int = 50,
) -> Evidence:
    requested = np.unique(np.asarray(concept_ids, dtype=np.int32))
    if requested.size == 0:
        raise InputError("no concepts to describe", path=str(rows.path))
    if requested[0] < 0 or requested[-1] >= rows.d_sae:
        raise InputError(f"concept ids must be in [0, d_sae={rows.d_sae})", path=str(rows.path), field="concept_id")
    n_c = requested.size
    st = EvidenceState(
        concept_ids=requested,
        top=TopK(k),
        sample=TopK(sample),
        background_keys=np.zeros(0),
        background_rows=np.zeros(0, np.int64),
        background_active=np.zeros((0, n_c), bool),
        n_active=np.zeros(n_c, np.int64),
        score_sum=np.zeros(n_c),
        n_scored_active=np.zeros(n_c, np.int64),
        co_active=np.zeros((n_c, n_c), np.int64),
        value_rows={},
        value_active={},
    )
    rng = np.random.default_rng(seed)
    coder = MetadataCoder(str(rows.path), max_values)
    has_meta = S.METADATA in rows.parquet.schema_arrow.names
    meta_iter = _iter_metadata(rows, batch_rows) if has_meta else None
    for batch in iter_row_batches(rows, batch_rows=batch_rows):
        n = len(batch)
        row_of = np.repeat(np.arange(n), np.diff(batch.offsets))
        hit = np.isin(batch.concept_ids, requested)
        c_idx = np.searchsorted(requested, batch.concept_ids[hit]).astype(np.int32)
        local = row_of[hit]
        file_rows = batch.first_row + local
        vals = batch.concept_acts[hit]
        st.top.add(c_idx, vals, file_rows)
        st.sample.add(c_idx, -rng.random(c_idx.size), file_rows)
        active = np.zeros((n, n_c), dtype=bool)
        active[local, c_idx] = True
        # background: bottom-k of a uniform key per row
        keys = rng.random(n)
        all_keys = np.concatenate([st.background_keys, keys])
        all_rows = np.concatenate([st.background_rows, batch.first_row + np.arange(n)])
        all_act = np.concatenate([st.background_active, active])
        keep = np.argsort(all_keys, kind="stable")[:background]
        st.background_keys, st.background_rows, st.background_active = all_keys[keep], all_rows[keep], all_act[keep]
        st.n_active += active.sum(axis=0)
        scored = ~np.isnan(batch.scores)
        act_f = active.astype(np.float64)
        st.score_sum += np.where(scored, batch.scores, 0.0) @ act_f
        st.n_scored_active += active[scored].sum(axis=0)
        st.co_active += np.rint(act_f.T @ act_f).astype(np.int64)
        st.n_rows += n
        st.n_scored += int(scored.sum())
        st.score_total += float(batch.scores[scored].sum())
        if meta_iter is not None:
            codes = coder.encode(next(meta_iter), batch.first_row)
            _count_values(st, codes, act_f)
    for name in coder.skipped():
        st.value_rows.pop(name, None)
        st.value_active.pop(name, None)
    return _finish(st, coder)


def _count_values(st: EvidenceState, codes: dict[str, np.ndarray], act_f: np.ndarray) -> None:
    for name, code in codes.items():
        n_values = int(code.max()) + 1 if code.size else 0
        if n_values == 0:
            continue
        present = code >= 0
        onehot = np.zeros((code.size, n_values))
        onehot[np.flatnonzero(present), code[present]] = 1.0
        rows = onehot.sum(axis=0).astype(np.int64)
        act = np.rint(onehot.T @ act_f).astype(np.int64)
        old_r = st.value_rows.get(name, np.zeros(0, np.int64))
        old_a = st.value_active.get(name, np.zeros((0, act_f.shape[1]), np.int64))
        width = max(old_r.size, n_values)
        new_r = np.zeros(width, np.int64)
        new_a = np.zeros((width, act_f.shape[1]), np.int64)
        new_r[: old_r.size] += old_r
        new_a[: old_a.shape[0]] += old_a
        new_r[:n_values] += rows
        new_a[:n_values] += act
        st.value_rows[name], st.value_active[name] = new_r, new_a


def _finish(st: EvidenceState, coder: MetadataCoder) -> Evidence:
    ids = [int(c) for c in st.concept_ids]
    names = coder.analysed()
    value_rows: dict[str, dict[str, int]] = {}
    value_active: dict[str, dict[str, np.ndarray]] = {}
    for name, counts in st.value_rows.items():
        values = names[name]
        value_rows[name] = {values[i]: int(counts[i]) for i in range(counts.size)}
        value_active[name] = {values[i]: st.value_active[name][i] for i in range(counts.size)}
    mean_active = {
        c: (float(st.score_sum[i] / st.n_scored_active[i]) if st.n_scored_active[i] else None)
        for i, c in enumerate(ids)
    }
    return Evidence(
        concept_ids=ids,
        top={c: st.top.of(i) for i, c in enumerate(ids)},
        sample={c: sorted(r for r, _ in st.sample.of(i)) for i, c in enumerate(ids)},
        background=[
            (int(r), frozenset(ids[j] for j in np.flatnonzero(a)))
            for r, a in sorted(zip(st.background_rows, st.background_active, strict=True), key=lambda t: int(t[0]))
        ],
        n_active={c: int(st.n_active[i]) for i, c in enumerate(ids)},
        mean_score_active=mean_active,
        co_active=st.co_active,
        value_rows=value_rows,
        value_active=value_active,
        skipped_fields=coder.skipped(),
        n_rows=st.n_rows,
        mean_score=(st.score_total / st.n_scored) if st.n_scored else None,
        state_size=st.size(),
    )


ROW_FIELDS = (S.ROW_ID, S.BENCHMARK, S.SCORE)


def read_rows(rows: RowsFile, wanted: set[int], batch_rows: int = DEFAULT_BATCH_ROWS) -> dict[int, dict[str, object]]:
    """The id, benchmark, score, texts and metadata of the wanted file rows (streamed; only those are kept)."""
    names = rows.parquet.schema_arrow.names
    columns = [c for c in (*ROW_FIELDS, "prompt", "response", S.METADATA) if c in names]
    out: dict[int, dict[str, object]] = {}
    first = 0
    pf = rows.parquet
    for group in range(pf.num_row_groups):
        for rb in pf.iter_batches(batch_size=batch_rows, columns=columns, row_groups=[group]):
            n = rb.num_rows
            local = sorted(r - first for r in wanted if first <= r < first + n)
            if local:
                picked = pa.Table.from_batches([rb]).take(pa.array(local, pa.int64())).to_pylist()
                for i, rec in zip(local, picked, strict=True):
                    out[first + i] = rec
            first += n
    return out
