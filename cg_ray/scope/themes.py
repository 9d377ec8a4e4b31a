"""A benchmark's gaps, grouped into themes: concepts that fire on the same reference rows are one thing the
benchmark leaves out, seen through several SAE latents (MATH's LaTeX notation fires a dozen latents on three
quarters of its rows; GSM8K has none of it). A user reads a few themes, not hundreds of latents.

Two gaps are one theme when the Jaccard index of their firing-row sets over the reference is at least
`THEME_JACCARD`; grouping is `profile.grouping.group_near_duplicates` (greedy, strongest evidence first: each
gap joins the first representative it is that close to). A theme's evidence is its representative's own test
(each member is a gap at its own q); the theme's row counts (rows where any member fires, on each side) are
descriptive: they were not chosen on other rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from cg_ray.profile.grouping import group_near_duplicates
from cg_ray.scope.counts import SuiteActivations
from cg_ray.scope.reference import ReferenceComparison

THEME_JACCARD = 0.5


@dataclass(frozen=True)
class Theme:
    representative: int  # the gap with the strongest evidence (smallest q) of the theme
    members: tuple[int, ...]  # every gap of the theme, the representative first
    reference_rows: int  # reference rows where any member fires
    bench_rows: int  # benchmark rows where any member fires


def firing_matrix(
    acts: SuiteActivations, thresholds: npt.NDArray[np.float64], concepts: Sequence[int], rows: npt.NDArray[np.bool_]
) -> sparse.csc_matrix:
    """rows-of-`rows` × concepts, 1 where the concept reaches its firing threshold."""
    m = acts.matrix[:, list(concepts)].tocsr()[np.flatnonzero(rows)].tocsc()
    col = np.repeat(np.arange(m.shape[1]), np.diff(m.indptr))
    fires = (m.data >= thresholds[np.asarray(concepts, dtype=np.int64)][col]).astype(np.float64)
    out = sparse.csc_matrix((fires, m.indices, m.indptr), shape=m.shape)
    out.eliminate_zeros()
    return out


def gap_themes(
    acts: SuiteActivations,
    thresholds: npt.NDArray[np.float64],
    cmp: ReferenceComparison,
    reference_groups: Sequence[str],
    bench_groups: Sequence[str] | None = None,
    jaccard: float = THEME_JACCARD,
) -> list[Theme]:
    """The comparison's gaps grouped by their firing rows in the reference, most confident theme first.
    `bench_groups`: the groups the compared side pools (default: the comparison's benchmark alone)."""
    concepts = [int(c) for c in cmp.gaps["concept"]]  # most confident first
    if not concepts:
        return []
    ref = firing_matrix(acts, thresholds, concepts, np.isin(acts.groups, list(reference_groups)))
    bench = firing_matrix(acts, thresholds, concepts, np.isin(acts.groups, list(bench_groups or [cmp.benchmark])))
    inter = (ref.T @ ref).toarray()  # gaps × gaps: reference rows both fire on
    size = np.diag(inter)
    with np.errstate(divide="ignore", invalid="ignore"):
        similarity = np.where(inter > 0, inter / (size[:, None] + size[None, :] - inter), 0.0)
    # Strongest evidence first: `gaps` is ordered by q (ties: the larger reference share).
    n = len(concepts)
    rep = group_near_duplicates(similarity, -np.arange(n, dtype=np.float64), jaccard)
    themes = []
    for r in sorted(set(rep.tolist())):
        slots = [r, *(i for i in range(n) if rep[i] == r and i != r)]
        any_ref = np.asarray(ref[:, slots].sum(axis=1)).ravel() > 0
        any_bench = np.asarray(bench[:, slots].sum(axis=1)).ravel() > 0
        themes.append(Theme(concepts[r], tuple(concepts[i] for i in slots), int(any_ref.sum()), int(any_bench.sum())))
    return themes
