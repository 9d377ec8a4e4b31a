"""Distinctive terms of classes of rows (failure modes, concepts), each against rows of its own metadata
cells where it is off, so a mode inside one task is not described by that task's own words.

A class is read from a seeded random draw of up to `SAMPLE_ROWS` of its rows (so the share of its rows that
hold a term is an honest row share, not that of its most activating rows). Its background is the part of one
seeded sample of the suite that lies in the class's cells and outside the class, each background row weighted
so the cells weigh as they do in the class. The texts of all classes asked at once are read in one pass.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cg_ray.arrays import FloatArray, IntArray
from cg_ray.artifacts.rows import RowsFile
from cg_ray.profile.strata import RowFrame, cell_keys
from cg_ray.profile.terms import Terms, distinctive_terms

SAMPLE_ROWS = 200  # rows of a class read for its terms
BACKGROUND_ROWS = 4000  # the suite's sample the backgrounds are drawn from
MIN_BACKGROUND = 30  # fewer background rows in the class's cells: contrast with the whole sample instead
TEXT_COLUMNS = ("prompt", "response")


class ClassTerms:
    """Terms of classes given as (row positions, weights), cached by key; `texts` keeps what was read."""

    def __init__(self, rows: RowsFile, frame: RowFrame, adjusted_for: Sequence[str], seed: int) -> None:
        self.rows = rows
        self.frame = frame
        self.seed = seed
        self.cells = cell_keys(frame, list(adjusted_for))
        rng = np.random.default_rng(seed)
        self.background = np.sort(rng.choice(frame.n_rows, size=min(BACKGROUND_ROWS, frame.n_rows), replace=False))
        self.columns = [c for c in TEXT_COLUMNS if c in rows.parquet.schema_arrow.names]
        self.cache: dict[object, Terms] = {}
        self.texts: dict[int, str] = {}

    def for_cells(self, adjusted_for: Sequence[str]) -> ClassTerms:
        """The same book with backgrounds drawn from the cells of `adjusted_for` (a split's own fields): its
        own cache, the texts read so far shared."""
        other = copy.copy(self)  # shallow: `texts` stays the same dict
        other.cells = cell_keys(self.frame, list(adjusted_for))
        other.cache = {}
        return other

    def sample(self, key: object, positions: IntArray) -> IntArray:
        """A seeded draw of up to SAMPLE_ROWS of the class's rows (the same draw for the same class)."""
        if positions.size <= SAMPLE_ROWS:
            return positions
        digest = hashlib.blake2b(str(key).encode(), digest_size=4).digest()  # str hashes are salted per process
        rng = np.random.default_rng([self.seed, int.from_bytes(digest, "little")])
        return np.sort(rng.choice(positions, size=SAMPLE_ROWS, replace=False))

    def own_background(self, positions: IntArray) -> tuple[IntArray, FloatArray]:
        """Background rows in the class's cells and outside it, weighted to the class's cell mix."""
        bg = self.background[~np.isin(self.background, positions)]
        cells, counts = np.unique(self.cells[positions], return_counts=True)
        share = dict(zip(cells.tolist(), (counts / counts.sum()).tolist(), strict=True))
        in_cells = np.isin(self.cells[bg], cells)
        if in_cells.sum() < MIN_BACKGROUND:
            return bg, np.ones(bg.size)
        bg = bg[in_cells]
        bg_cells, bg_counts = np.unique(self.cells[bg], return_counts=True)
        per = dict(zip(bg_cells.tolist(), bg_counts.tolist(), strict=True))
        weights = np.array([share[c] / per[c] for c in self.cells[bg].tolist()])
        return bg, weights

    def compute(self, classes: dict[object, tuple[IntArray, FloatArray]]) -> dict[object, Terms]:
        """Terms of every class not yet cached (key → (row positions ascending, their weights))."""
        todo = {k: v for k, v in classes.items() if k not in self.cache}
        if todo and not self.columns:
            self.cache.update({k: Terms([], [], []) for k in todo})
        elif todo:
            drawn: dict[object, tuple[IntArray, FloatArray]] = {}
            for k, (pos, w) in todo.items():
                s = self.sample(k, pos)
                drawn[k] = (s, w[np.searchsorted(pos, s)])
            backgrounds = {k: self.own_background(pos) for k, (pos, _) in todo.items()}
            needed = np.unique(np.concatenate([*(d[0] for d in drawn.values()), *(b[0] for b in backgrounds.values())]))
            missing = needed[~np.isin(needed, np.fromiter(self.texts, np.int64, len(self.texts)))]
            if missing.size:
                read = read_texts(self.rows, self.frame.file_rows[missing], self.columns)
                self.texts.update(zip(missing.tolist(), read, strict=True))
            local = {int(p): i for i, p in enumerate(needed)}
            texts = [self.texts[int(p)] for p in needed]

            def at(pos: IntArray) -> IntArray:
                return np.array([local[int(p)] for p in pos], dtype=np.int64)

            keys = list(todo)
            found = distinctive_terms(
                texts,
                [(at(drawn[k][0]), drawn[k][1]) for k in keys],
                [(at(backgrounds[k][0]), backgrounds[k][1]) for k in keys],
            )
            self.cache.update(zip(keys, found, strict=True))
        return {k: self.cache[k] for k in classes}

    def text(self, position: int) -> str:
        return self.texts.get(position, "")


def read_texts(rows: RowsFile, file_rows: npt.NDArray[np.int64], columns: Sequence[str]) -> list[str]:
    """The texts (columns joined by a blank line) of the given sorted file rows, streamed by row group."""
    out: list[str] = []
    first = 0
    wanted = np.asarray(file_rows, dtype=np.int64)
    for group in range(rows.parquet.num_row_groups):
        for rb in rows.parquet.iter_batches(columns=list(columns), row_groups=[group]):
            lo, hi = np.searchsorted(wanted, [first, first + rb.num_rows])
            if hi > lo:
                picked = rb.take(pa.array(wanted[lo:hi] - first))
                cols = [picked.column(c).to_pylist() for c in columns]
                out.extend("\n\n".join(str(v) for v in parts if v) for parts in zip(*cols, strict=True))
            first += rb.num_rows
    return out
