"""Groups of rows that must stay together, and the two ways they are dealt: into the parts of the repeated
splits (`assign_parts`, `splits.plan_splits`) and into one fit / test split (`grouped_split`: `cg-ray
validate`, the run diff). Rows that share a question or template would leak from the rows that choose a
finding to the rows that test it, so a group is never divided, and intervals are computed by cluster over
the same groups. The group of a row is, by the first rule that applies to the analysed rows:

a. the `group` column of rows.parquet (string or integer), else the `group` field of the rows' `metadata`.
   Every row needs one (a null is an error naming the file, row and field). `cg-ray extract`, the
   pipeline and uploads do not keep a top-level `group` key of an input record, but they keep `metadata`:
   `{"metadata": {"group": "q17"}}` works everywhere.
b. the id prefix rule, when any row id contains '#': the id up to its last '#' ("q17#0".."q17#3" are 4
   answers to one question "q17", within one benchmark). An id without '#' is its own group (it joins the
   answers whose prefix equals it: "q17" with "q17#0").
c. identical prompts, when rows.parquet has a `prompt` column: rows whose prompt texts are equal once runs
   of whitespace are collapsed (N answers to one question). Only an 8-byte hash a row is kept; a row
   without a prompt is its own group.
d. else every row is its own group.

A group column that puts every row in one group is an error; fewer than two groups (a tiny suite) is
reported by `too_few_groups`, and the findings are then listed unjudged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cg_ray import schemas as S
from cg_ray.arrays import IntArray
from cg_ray.artifacts.row_batch import RowsFile
from cg_ray.errors import InputError
from cg_ray.profile.metadata import value_text
from cg_ray.profile.strata import RowFrame

GROUP = "group"
PROMPT = "prompt"
PartArray = npt.NDArray[np.int8]


@dataclass(frozen=True)
class RowGroups:
    """One group code 0..n_groups-1 per row of the frame, in frame order, and the rule that made them."""

    codes: IntArray
    rule: str
    n_groups: int


def row_groups(rows: RowsFile, frame: RowFrame) -> RowGroups:
    """The groups of the frame's rows (see the module docstring)."""
    names = rows.parquet.schema_arrow.names
    reader = _Reader(rows, frame)
    if GROUP in names:
        codes, rule, field = reader.group_column(), "the group column", GROUP
    else:
        found = reader.metadata_groups() if S.METADATA in names else None
        if found is not None:
            codes, rule, field = found, f"the metadata field {GROUP!r}", GROUP
        elif pc.any(pc.match_substring(frame.row_ids, "#")).as_py():
            codes, rule, field = _id_prefix_groups(frame), "row ids up to their last '#'", S.ROW_ID
        elif PROMPT in names:
            codes, rule, field = reader.prompt_groups(), "identical prompts", PROMPT
        else:
            codes, rule, field = np.arange(frame.n_rows, dtype=np.int64), "one row each", S.ROW_ID
    n_groups = int(codes.max()) + 1 if codes.size else 0
    if field == GROUP and n_groups < 2:  # a group column the user gave that cannot split anything
        raise InputError(
            f"the {rule} puts all {frame.n_rows} rows analysed in one group: the splits need at least two "
            "groups (rows of one group are never divided between the rows that choose and those that test)",
            path=str(rows.path),
            field=field,
        )
    return RowGroups(codes, rule, n_groups)


def too_few_groups(groups: RowGroups) -> str | None:
    """Why these groups cannot be split (None when they can): the findings are then not judged."""
    if groups.n_groups >= 2:
        return None
    return (
        f"splits skipped: {groups.n_groups} group{'' if groups.n_groups == 1 else 's'} of rows by {groups.rule}, "
        "and a split needs two (rows of one group are never divided); no finding is confirmed"
    )


def assign_parts(codes: IntArray, k: int, seed: int) -> PartArray:
    """The part (0..k-1) of each row: whole groups to one part, parts near-equal in rows.

    The groups are shuffled with `seed`, then placed largest first (stable, so equal sizes keep the
    shuffled order) each into the part with the fewest rows so far (ties: the lowest part). Equal-size
    groups are placed in one vectorised step per distinct size, exactly as the one-by-one greedy would:
    its choices are the smallest (load, part) pairs of the parts' next slots. Part sizes then differ by at
    most the largest group."""
    codes = np.asarray(codes)
    if not 2 <= k <= np.iinfo(np.int8).max:
        raise ValueError(f"k must be in 2..127, got {k}")
    if codes.size and int(codes.min()) < 0:
        raise ValueError("group codes must be non-negative")
    sizes = np.bincount(codes).astype(np.int64) if codes.size else np.zeros(0, np.int64)
    if np.count_nonzero(sizes) < k:
        raise ValueError(f"{np.count_nonzero(sizes)} groups cannot fill {k} parts")
    perm = np.random.default_rng(seed).permutation(sizes.size)
    order = perm[np.argsort(-sizes[perm], kind="stable")]
    order = order[sizes[order] > 0]
    ordered_sizes = sizes[order]
    group_part = np.empty(sizes.size, dtype=np.int8)
    load = np.zeros(k, dtype=np.int64)
    # Runs of equal size in `ordered_sizes` (it is non-increasing).
    starts = np.flatnonzero(np.r_[True, ordered_sizes[1:] != ordered_sizes[:-1]])
    ends = np.r_[starts[1:], ordered_sizes.size]
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        size, m = int(ordered_sizes[start]), end - start
        # A part takes at most m/k + spread/size + 1 of these groups, so that many slots each suffice.
        slots = min(m, m // k + -(-int(load.max() - load.min()) // size) + 2)
        slot_load = load[:, None] + size * np.arange(slots, dtype=np.int64)[None, :]
        keys = np.sort((slot_load * k + np.arange(k, dtype=np.int64)[:, None]).ravel())[:m]
        chosen = keys % k
        group_part[order[start:end]] = chosen
        load += size * np.bincount(chosen, minlength=k)
    parts: PartArray = group_part[codes]
    return parts


def group_strata(strata: npt.NDArray[np.integer], groups: npt.NDArray[np.integer]) -> IntArray:
    """The stratum of each group (code 0..G-1): the one holding most of its rows (ties: the lowest)."""
    strata, groups = np.asarray(strata, np.int64), np.asarray(groups, np.int64)
    if not groups.size:
        return np.zeros(0, np.int64)
    n_strata = int(strata.max()) + 1
    counts = np.bincount(groups * n_strata + strata, minlength=(int(groups.max()) + 1) * n_strata)
    out: IntArray = counts.reshape(-1, n_strata).argmax(axis=1).astype(np.int64)
    return out


def grouped_split(
    strata: npt.NDArray[np.integer], groups: npt.NDArray[np.integer], test_fraction: float, seed: int
) -> npt.NDArray[np.bool_]:
    """A test mask of whole groups, stratified by the groups' strata (`group_strata`), seeded: in each stratum
    the groups are shuffled and the test part is the prefix whose rows come closest to test_fraction × the
    stratum's rows (at least one group, never all). One row a group: round(test_fraction × n) rows."""
    groups = np.asarray(groups, np.int64)
    rng = np.random.default_rng(seed)
    sizes = np.bincount(groups) if groups.size else np.zeros(0, np.int64)
    home = group_strata(strata, groups)
    test_group = np.zeros(sizes.size, dtype=bool)
    for s in np.unique(home[sizes > 0]):
        mine = rng.permutation(np.flatnonzero((home == s) & (sizes > 0)))
        if mine.size < 2:
            continue  # one group cannot be split (`check_rows` refuses it)
        cum = np.cumsum(sizes[mine])
        n_test = int(np.argmin(np.abs(cum[:-1] - test_fraction * cum[-1]))) + 1
        test_group[mine[:n_test]] = True
    out: npt.NDArray[np.bool_] = test_group[groups]
    return out


def _id_prefix_groups(frame: RowFrame) -> IntArray:
    """Rule b: (benchmark, id up to its last '#'), as dense codes."""
    prefix = pc.replace_substring_regex(frame.row_ids, pattern="#[^#]*$", replacement="")
    ids = pc.dictionary_encode(prefix).indices.to_numpy().astype(np.int64)
    bench = frame.codes.get(S.BENCHMARK)  # absent when the frame holds one benchmark
    key = ids if bench is None else bench.astype(np.int64) * (int(ids.max(initial=0)) + 1) + ids
    return _dense(key)


def _dense(key: npt.NDArray[np.generic]) -> IntArray:
    """Codes 0..G-1 for the distinct values of `key`, numbered by first appearance."""
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    codes: IntArray = rank[inverse.reshape(-1)]
    return codes


class _Reader:
    """Streams one column of the frame's rows, one row group at a time, in file order."""

    def __init__(self, rows: RowsFile, frame: RowFrame) -> None:
        self.rows = rows
        self.frame = frame
        # The frame may be a reordered subset: work in file order, then put the results back in frame order.
        self.order = np.argsort(frame.file_rows, kind="stable")
        self.sorted_rows = frame.file_rows[self.order]

    def batches(self, column: str) -> Iterator[tuple[int, IntArray, pa.Array]]:
        """(position in file order of the first row, file rows, values) per batch holding frame rows."""
        end = 0
        for group in range(self.rows.parquet.num_row_groups):
            first, end = end, end + self.rows.parquet.metadata.row_group(group).num_rows
            if np.searchsorted(self.sorted_rows, first) == np.searchsorted(self.sorted_rows, end):
                continue  # no analysed row in this row group: not read
            for rb in self.rows.parquet.iter_batches(columns=[column], row_groups=[group]):
                lo, hi = np.searchsorted(self.sorted_rows, [first, first + rb.num_rows])
                if hi > lo:
                    file_rows = self.sorted_rows[lo:hi]
                    yield int(lo), file_rows, rb.column(0).take(pa.array(file_rows - first))
                first += rb.num_rows

    def in_frame_order(self, sorted_codes: IntArray) -> IntArray:
        codes = np.empty_like(sorted_codes)
        codes[self.order] = sorted_codes
        return _dense(codes)

    def missing(self, file_row: int, what: str) -> InputError:
        position = int(self.order[np.searchsorted(self.sorted_rows, file_row)])
        return InputError(
            f"{what} (row_id {self.frame.row_id(position)!r}); every row needs a group once any has one",
            path=str(self.rows.path),
            row=file_row,
            field=GROUP,
        )

    def group_column(self) -> IntArray:
        """Rule a, the column: its values as codes (a dict over distinct values, not rows)."""
        index: dict[object, int] = {}
        sorted_codes = np.empty(self.sorted_rows.size, dtype=np.int64)
        for lo, file_rows, values in self.batches(GROUP):
            kind = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
            if not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                raise InputError(
                    f"has type {values.type}, expected string or integer", path=str(self.rows.path), field=GROUP
                )
            if values.null_count:
                nulls = values.is_null().to_numpy(zero_copy_only=False)
                raise self.missing(int(file_rows[np.flatnonzero(nulls)[0]]), "is null")
            encoded = values if pa.types.is_dictionary(values.type) else pc.dictionary_encode(values)
            mapping = np.array([index.setdefault(v, len(index)) for v in encoded.dictionary.to_pylist()], np.int64)
            sorted_codes[lo : lo + file_rows.size] = mapping[encoded.indices.to_numpy(zero_copy_only=False)]
        return self.in_frame_order(sorted_codes)

    def metadata_groups(self) -> IntArray | None:
        """Rule a, the metadata field; None when no analysed row has one."""
        index: dict[str, int] = {}
        sorted_codes = np.full(self.sorted_rows.size, -1, dtype=np.int64)
        first_missing: int | None = None
        for lo, file_rows, values in self.batches(S.METADATA):
            for i, raw in enumerate(values.to_pylist()):
                obj = _json_object(raw)
                value = obj.get(GROUP) if obj is not None else None
                if value is None:
                    first_missing = int(file_rows[i]) if first_missing is None else first_missing
                    continue
                text = value_text(value)
                if text is None:
                    raise InputError(
                        f"metadata {GROUP!r} is nested; expected a string or integer",
                        path=str(self.rows.path),
                        row=int(file_rows[i]),
                        field=GROUP,
                    )
                sorted_codes[lo + i] = index.setdefault(text, len(index))
        if not index:
            return None
        if first_missing is not None:
            raise self.missing(first_missing, f"has no metadata {GROUP!r}")
        return self.in_frame_order(sorted_codes)

    def prompt_groups(self) -> IntArray:
        """Rule c: an 8-byte blake2b of each prompt with its whitespace runs collapsed (8 bytes a row)."""
        hashes = np.zeros(self.sorted_rows.size, dtype=np.uint64)
        alone = np.zeros(self.sorted_rows.size, dtype=bool)
        for lo, _file_rows, values in self.batches(PROMPT):
            texts = values.cast(pa.string()).to_pylist()
            digest = b"".join(
                hashlib.blake2b(" ".join(t.split()).encode(), digest_size=8).digest() if t else bytes(8) for t in texts
            )
            hashes[lo : lo + len(texts)] = np.frombuffer(digest, dtype=np.uint64)
            alone[lo : lo + len(texts)] = [not t or not t.strip() for t in texts]
        codes = _dense(hashes)
        # A row without a prompt text shares nothing: give it a code of its own.
        codes[alone] = codes.max(initial=-1) + 1 + np.arange(int(alone.sum()))
        return self.in_frame_order(codes)


def _json_object(raw: str | None) -> dict[str, object] | None:
    """The metadata JSON object, or None; a bad value is reported by `read_frame`, which runs first."""
    try:
        obj = json.loads(raw) if raw else None
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None
