"""Weakest slices: conjunctions of metadata values (and `benchmark`) whose mean score is confidently low.

Every conjunction of up to `max_order` (field = value) conditions over the analysed fields of a `RowFrame`
is counted with one group-by per field combination (pandas, vectorised: C(F, 1) + C(F, 2) group-bys for F
fields). A slice is kept with ≥ `min_rows` scored rows and ranked by the upper end of a 95% interval of its
mean score, ascending (the slice the model is most *confidently* weak on first; ties: more rows first):
Clopper–Pearson when every score is 0 or 1, else the Wilson interval with the rows as trials, which bounds
any score in [0, 1] conservatively (its variance is at most p(1 − p)). Walking that order, a slice whose
rows are ≥ `duplicate_jaccard` Jaccard-identical to a better one is dropped (e.g. `level=5` when it holds
the same rows as `type=Geometry & level=5` would be a copy). Unscored rows count for nothing here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from cg_ray.profile.strata import RowFrame

DEFAULT_MAX_ORDER = 2
DEFAULT_MIN_ROWS = 20
DUPLICATE_JACCARD = 0.8
EXAMPLES = 3
DUPLICATE_POOL_FACTOR = 10  # slices examined for duplicates per slice reported


@dataclass(frozen=True)
class Slice:
    conditions: tuple[tuple[str, int], ...]  # (field, code), in field order
    n_rows: int
    mean_score: float
    low: float
    high: float

    def text(self, frame: RowFrame) -> str:
        return " & ".join(f"{f}={frame.value(f, c)}" for f, c in self.conditions)

    def as_dict(self, frame: RowFrame) -> dict[str, str]:
        return {f: frame.value(f, c) for f, c in self.conditions}

    def mask(self, frame: RowFrame) -> npt.NDArray[np.bool_]:
        m = frame.scored.copy()
        for f, c in self.conditions:
            m &= frame.codes[f] == c
        return m


def mean_intervals(n: np.ndarray, total: np.ndarray, binary: bool, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    alpha = 1.0 - confidence
    if binary:
        lo, hi = proportion_confint(np.rint(total), n, alpha=alpha, method="beta")
    else:
        lo, hi = proportion_confint(total, n, alpha=alpha, method="wilson")
    return np.clip(np.nan_to_num(lo, nan=0.0), 0, 1), np.clip(np.nan_to_num(hi, nan=1.0), 0, 1)


def candidate_slices(
    frame: RowFrame, max_order: int = DEFAULT_MAX_ORDER, min_rows: int = DEFAULT_MIN_ROWS, confidence: float = 0.95
) -> list[Slice]:
    """Every conjunction with ≥ `min_rows` scored rows, in rank order (upper end ascending, then size)."""
    scored = frame.scored
    if not scored.any():
        return []
    y = frame.scores[scored]
    binary = bool(np.all((y == 0) | (y == 1)))
    base = pd.DataFrame({name: codes[scored] for name, codes in frame.codes.items()})
    base["_y"] = y
    fields = list(frame.codes)
    found: list[tuple[tuple[tuple[str, int], ...], int, float]] = []
    for order in range(1, max_order + 1):
        for combo in itertools.combinations(fields, order):
            g = base.groupby(list(combo), sort=False)["_y"].agg(["size", "sum"])
            g = g[g["size"] >= min_rows]
            for key, size, total in zip(g.index, g["size"].to_numpy(), g["sum"].to_numpy(), strict=True):
                values = key if isinstance(key, tuple) else (key,)
                if any(int(v) < 0 for v in values):  # "the field is missing" is no condition to report
                    continue
                found.append((tuple(zip(combo, (int(v) for v in values), strict=True)), int(size), float(total)))
    if not found:
        return []
    n = np.array([f[1] for f in found], dtype=np.float64)
    total = np.array([f[2] for f in found])
    low, high = mean_intervals(n, total, binary, confidence)
    mean = total / n
    order_idx = np.lexsort((np.arange(n.size), -n, high))
    return [Slice(found[i][0], int(n[i]), float(mean[i]), float(low[i]), float(high[i])) for i in order_idx]


def weakest_slices(
    frame: RowFrame,
    top_k: int,
    max_order: int = DEFAULT_MAX_ORDER,
    min_rows: int = DEFAULT_MIN_ROWS,
    duplicate_jaccard: float = DUPLICATE_JACCARD,
    confidence: float = 0.95,
) -> list[Slice]:
    """The first `top_k` slices in rank order, near-duplicates of a better slice dropped."""
    kept: list[Slice] = []
    masks: list[npt.NDArray[np.bool_]] = []
    for s in candidate_slices(frame, max_order, min_rows, confidence)[: DUPLICATE_POOL_FACTOR * top_k]:
        m = s.mask(frame)
        if not near_duplicate(m, masks, duplicate_jaccard):
            kept.append(s)
            masks.append(m)
            if len(kept) == top_k:
                break
    return kept


def near_duplicate(
    mask: npt.NDArray[np.bool_], kept: list[npt.NDArray[np.bool_]], threshold: float = DUPLICATE_JACCARD
) -> bool:
    """Whether the rows of `mask` are ≥ `threshold` Jaccard-identical to those of a better slice kept."""
    size = int(mask.sum())
    for other in kept:
        inter = int(np.count_nonzero(mask & other))
        if inter / max(size + int(other.sum()) - inter, 1) >= threshold:
            return True
    return False


def example_rows(frame: RowFrame, mask: npt.NDArray[np.bool_], k: int = EXAMPLES) -> list[str]:
    """Up to k of the slice's rows, lowest scores first (the failures it stands for), then file order."""
    idx = np.flatnonzero(mask)
    idx = idx[np.argsort(frame.scores[idx], kind="stable")[:k]]
    return [frame.row_id(int(i)) for i in idx]


def best_fields(slices: list[Slice]) -> list[str]:
    """The metadata fields in the order the best slices use them (for `--adjust-for auto`)."""
    out: list[str] = []
    for s in slices:
        for f, _ in s.conditions:
            if f not in out:
                out.append(f)
    return out


@dataclass(frozen=True)
class SliceCounts:
    """Every conjunction with its scored rows and score sums per part (`size[s, k]`, `total[s, k]`), from one
    group-by per field combination with the part as one more key: a split's choosing counts are its parts'
    sum, so R selections cost about one."""

    conditions: list[tuple[tuple[str, int], ...]]
    size: npt.NDArray[np.float64]
    total: npt.NDArray[np.float64]
    binary: bool


def slice_counts(frame: RowFrame, part: npt.NDArray[np.integer], parts: int, max_order: int) -> SliceCounts:
    scored = frame.scored
    y = frame.scores[scored]
    base = pd.DataFrame({name: codes[scored] for name, codes in frame.codes.items()})
    base["_y"] = y
    base["_part"] = np.asarray(part)[scored]
    fields = list(frame.codes)
    conditions: list[tuple[tuple[str, int], ...]] = []
    sizes: list[np.ndarray] = []
    totals: list[np.ndarray] = []
    for order in range(1, max_order + 1):
        for combo in itertools.combinations(fields, order):
            g = base.groupby([*combo, "_part"], sort=False)["_y"].agg(["size", "sum"])
            size = g["size"].unstack("_part", fill_value=0).reindex(columns=range(parts), fill_value=0)
            total = g["sum"].unstack("_part", fill_value=0).reindex(columns=range(parts), fill_value=0.0)
            keys = size.index.to_list()
            ok = [not any(int(v) < 0 for v in (k if isinstance(k, tuple) else (k,))) for k in keys]
            for key, good in zip(keys, ok, strict=True):
                if good:
                    values = key if isinstance(key, tuple) else (key,)
                    conditions.append(tuple(zip(combo, (int(v) for v in values), strict=True)))
            sizes.append(size.to_numpy(dtype=np.float64)[ok])
            totals.append(total.to_numpy(dtype=np.float64)[ok])
    binary = bool(np.all((y == 0) | (y == 1))) if y.size else True
    empty = np.zeros((0, parts))
    return SliceCounts(conditions, np.vstack(sizes) if sizes else empty, np.vstack(totals) if totals else empty, binary)


def training_slices(
    frame: RowFrame,
    counts: SliceCounts,
    keep: npt.NDArray[np.bool_],
    top_k: int,
    min_rows: int = DEFAULT_MIN_ROWS,
    duplicate_jaccard: float = DUPLICATE_JACCARD,
    confidence: float = 0.95,
    masks: dict[tuple[tuple[str, int], ...], npt.NDArray[np.bool_]] | None = None,
) -> list[Slice]:
    """The weakest slices on the parts in `keep` (ranked and de-duplicated as `weakest_slices`; the duplicate
    check compares the slices' scored rows over the whole suite, which holds no score)."""
    n = counts.size[:, keep].sum(axis=1)
    total = counts.total[:, keep].sum(axis=1)
    ok = np.flatnonzero(n >= min_rows)
    if ok.size == 0:
        return []
    low, high = mean_intervals(n[ok], total[ok], counts.binary, confidence)
    order = ok[np.lexsort((ok, -n[ok], high))]
    bounds = {int(s): (float(lo), float(hi)) for s, lo, hi in zip(ok, low, high, strict=True)}
    masks = {} if masks is None else masks
    kept: list[Slice] = []
    kept_masks: list[npt.NDArray[np.bool_]] = []
    for s in order[: DUPLICATE_POOL_FACTOR * top_k]:
        cond = counts.conditions[int(s)]
        cand = Slice(cond, int(n[s]), float(total[s] / n[s]), *bounds[int(s)])
        if cond not in masks:
            masks[cond] = cand.mask(frame)
        m = masks[cond]
        if near_duplicate(m, kept_masks, duplicate_jaccard):
            continue
        kept.append(cand)
        kept_masks.append(m)
        if len(kept) == top_k:
            break
    return kept
