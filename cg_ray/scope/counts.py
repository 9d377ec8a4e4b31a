"""How many rows of each benchmark each concept fires on, under one firing rule for all of them.

A benchmark's scope is judged by comparing how often a concept fires on its rows and on a reference's rows,
so both must be counted with the same thresholds: they come from the pooled rows of every group counted
(`metrics.firing`, activations only). The rows are held as one sparse rows × concepts matrix: memory
O(non-zero activations), the same as the profile's pool (`profile.verdicts.PoolRows`) but for all concepts,
because a scope question is asked of every concept.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from cg_ray.artifacts.rows import iter_row_batches, open_rows
from cg_ray.errors import InputError
from cg_ray.metrics.firing import column_thresholds
from cg_ray.profile.groups import row_groups
from cg_ray.profile.strata import read_frame

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SuiteActivations:
    """s̃ of every row of one or more rows files (rows × d_sae, CSC) and each row's group name."""

    matrix: sparse.csc_matrix
    groups: npt.NDArray[np.str_]  # per row: its benchmark (or the name a reference file was given)
    row_ids: list[str]
    # per row: the rows it is not an independent draw from (a template, a question's answers: profile.groups),
    # unique across files; and per file the rule that made them
    clusters: npt.NDArray[np.str_] | None = None
    cluster_rules: tuple[str, ...] = ()

    @property
    def d_sae(self) -> int:
        return int(self.matrix.shape[1])

    def group_names(self) -> list[str]:
        return sorted(set(self.groups.tolist()))


def read_activations(
    paths: Sequence[str | os.PathLike[str]], rename: Sequence[str | None] | None = None, clusters: bool = False
) -> SuiteActivations:
    """The rows of each file, their groups being their benchmarks, or `rename[i]` for every row of file i (a
    reference of real use read as one group). All files must share one SAE width. `clusters`: also each row's
    group by the run's rules (`row_clusters`), which a scope's tests count by."""
    rename = list(rename) if rename is not None else [None] * len(paths)
    rows_i: list[IntArray] = []
    cols: list[npt.NDArray[np.int32]] = []
    vals: list[npt.NDArray[np.float32]] = []
    groups: list[npt.NDArray[np.str_]] = []
    ids: list[str] = []
    d_sae: int | None = None
    n = 0
    for path, name in zip(paths, rename, strict=True):
        rows = open_rows(path)
        if d_sae is not None and rows.d_sae != d_sae:
            raise InputError(
                f"d_sae {rows.d_sae} differs from the other rows' {d_sae}: a scope compares rows read by one reader",
                path=str(path),
            )
        d_sae = rows.d_sae
        for batch in iter_row_batches(rows):
            m = len(batch)
            rows_i.append(n + np.repeat(np.arange(m, dtype=np.int64), np.diff(batch.offsets)))
            cols.append(batch.concept_ids)
            vals.append(batch.concept_acts)
            names = np.asarray(batch.benchmark_names)[batch.benchmark_codes] if name is None else np.full(m, name)
            groups.append(names.astype(np.str_))
            ids.extend(str(r) for r in batch.row_ids.to_pylist())
            n += m
    assert d_sae is not None  # open_rows refuses an empty file, so at least one batch was read
    grouped = [row_clusters(p, i) for i, p in enumerate(paths)] if clusters else []
    data = np.concatenate(vals).astype(np.float64)
    keep = data > 0
    matrix = sparse.csc_matrix(
        (data[keep], (np.concatenate(rows_i)[keep], np.concatenate(cols)[keep])), shape=(n, d_sae)
    )
    matrix.sum_duplicates()
    return SuiteActivations(
        matrix=matrix, groups=np.concatenate(groups), row_ids=ids,
        clusters=np.concatenate([c for c, _ in grouped]) if grouped else None,
        cluster_rules=tuple(rule for _, rule in grouped),
    )  # fmt: skip


def row_clusters(path: str | os.PathLike[str], file_index: int) -> tuple[npt.NDArray[np.str_], str]:
    """Each row's group by the run's rules (`profile.groups`: a `group` column or metadata field, ids with
    '#', identical prompts, else one row each), prefixed by the file so groups of two files never merge."""
    rows = open_rows(path)
    groups = row_groups(rows, read_frame(rows))
    return np.char.add(f"{file_index}:", groups.codes.astype(np.str_)), groups.rule


@dataclass(frozen=True)
class FiringCounts:
    """Per group (benchmark or reference) the rows counted and, per concept, the rows it fires on."""

    groups: list[str]
    n_rows: IntArray  # per group
    fires: IntArray  # groups × d_sae
    thresholds: FloatArray  # d_sae: the shared firing thresholds

    def of(self, group: str) -> tuple[IntArray, int]:
        """(rows each concept fires on, rows) of one group."""
        if group not in self.groups:
            raise InputError(f"no rows of {group!r}; the rows hold {self.groups}")
        g = self.groups.index(group)
        return self.fires[g], int(self.n_rows[g])

    def pooled(self, groups: Sequence[str]) -> tuple[IntArray, int]:
        """(fires, rows) summed over several groups (a reference made of sibling benchmarks)."""
        parts = [self.of(g) for g in groups]
        return np.sum([p[0] for p in parts], axis=0), int(sum(p[1] for p in parts))


def firing_counts(acts: SuiteActivations) -> FiringCounts:
    """Count, per group, the rows on which each concept reaches its firing threshold over all rows."""
    thresholds = column_thresholds(acts.matrix)
    m = acts.matrix
    col = np.repeat(np.arange(m.shape[1]), np.diff(m.indptr))
    keep = m.data >= thresholds[col]
    names = acts.group_names()
    code = np.searchsorted(np.asarray(names), acts.groups)
    # A row fires a concept at most once (the matrix has no duplicate entries), so counting entries counts rows.
    flat = code[m.indices[keep]].astype(np.int64) * m.shape[1] + col[keep]
    fires = np.bincount(flat, minlength=len(names) * m.shape[1]).reshape(len(names), m.shape[1])
    n_rows = np.bincount(code, minlength=len(names))
    return FiringCounts(
        groups=names, n_rows=n_rows.astype(np.int64), fires=fires.astype(np.int64), thresholds=thresholds
    )
