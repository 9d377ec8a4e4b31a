"""Reader output (one sparse concept vector per text) packed into the rows schema's Arrow columns, and the
typed row that crosses process boundaries.

Arrow list columns are CSR: one offsets array over flat values. Every producer of rows (extract, the
pipeline's reader stage, the service) packs through `pack_concepts`, so the column types agree.
`SparseRow` is what the service's encoder deployment returns per text: numpy only, so unpickling it
in the ingress imports no torch (the reader's own `RowActs` lives beside the torch pooling code).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa


class SparseConcepts(Protocol):
    """What a reader returns per text (cg_ray.activations.pooling.RowActs, the fakes)."""

    @property
    def concept_ids(self) -> np.ndarray: ...

    @property
    def concept_acts(self) -> np.ndarray: ...

    @property
    def n_tokens(self) -> int: ...


@dataclass(frozen=True)
class SparseRow:
    """One text's sparse s̃ (a `SparseConcepts`), picklable without the reader's modules."""

    concept_ids: np.ndarray
    concept_acts: np.ndarray
    n_tokens: int

    @classmethod
    def of(cls, acts: SparseConcepts) -> SparseRow:
        """The arrays as the reader gave them (no copy, no dtype change): what the service reports is unchanged."""
        return cls(acts.concept_ids, acts.concept_acts, int(acts.n_tokens))


def sparse_rows(acts: Iterable[SparseConcepts]) -> list[SparseRow]:
    return [SparseRow.of(a) for a in acts]


@dataclass(frozen=True)
class PackedConcepts:
    n_tokens: pa.Array  # int32
    concept_ids: pa.ListArray  # list<int32>
    concept_acts: pa.ListArray  # list<float32>


def pack_concepts(acts: Sequence[SparseConcepts]) -> PackedConcepts:
    lengths = np.fromiter((len(a.concept_ids) for a in acts), dtype=np.int64, count=len(acts))
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32), pa.int32())
    ids = np.concatenate([a.concept_ids for a in acts]) if len(acts) else np.zeros(0, np.int32)
    values = np.concatenate([a.concept_acts for a in acts]) if len(acts) else np.zeros(0, np.float32)
    return PackedConcepts(
        n_tokens=pa.array([a.n_tokens for a in acts], pa.int32()),
        concept_ids=pa.ListArray.from_arrays(offsets, pa.array(ids.astype(np.int32), pa.int32())),
        concept_acts=pa.ListArray.from_arrays(offsets, pa.array(values.astype(np.float32), pa.float32())),
    )
