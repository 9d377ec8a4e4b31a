"""Themes (paper Appendix E): the described concepts grouped by how often they fire on the same rows.

Similarity is the Jaccard index of two concepts' active-row sets, |A ∩ B| / |A ∪ B|, from the co-activation
counts of the evidence pass. Average-linkage hierarchical clustering (`scipy.cluster.hierarchy`) on the
distance 1 − Jaccard is cut at 1 − `min_jaccard` (default 0.3: members of a theme share, on average, at
least 30% of their active rows). Themes have at least two members; the rest stay unthemed. A second pass
over rows.parquet gives each theme its support (rows where any member is active), their mean score and the
representative rows (largest summed s̃ of the members).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from cg_ray.artifacts.rows import RowsFile, iter_row_batches
from cg_ray.describe.evidence import TopK

FORMAT_VERSION = 1
MIN_JACCARD = 0.3


def jaccard(co_active: np.ndarray) -> np.ndarray:
    """Pairwise Jaccard of active-row sets from co-activation counts (diagonal = active rows)."""
    n = np.diag(co_active).astype(np.float64)
    union = n[:, None] + n[None, :] - co_active
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(union > 0, co_active / union, 0.0)
    np.fill_diagonal(jac, 1.0)
    return jac


def group(co_active: np.ndarray, min_jaccard: float = MIN_JACCARD) -> list[list[int]]:
    """Index groups (≥ 2 members), largest first; clusters cut at Jaccard distance 1 − min_jaccard."""
    m = co_active.shape[0]
    if m < 2:
        return []
    dist = 1.0 - jaccard(co_active)
    np.fill_diagonal(dist, 0.0)
    tree = linkage(squareform(np.clip(dist, 0.0, 1.0), checks=False), method="average")
    labels = fcluster(tree, t=1.0 - min_jaccard, criterion="distance")
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels):
        groups.setdefault(int(lab), []).append(i)
    out = [g for g in groups.values() if len(g) >= 2]
    return sorted(out, key=lambda g: (-len(g), g[0]))


@dataclass(frozen=True)
class ThemeRows:
    support: int
    mean_score: float | None
    representative: list[tuple[int, float]]  # (file row, summed member s̃)


def theme_rows(rows: RowsFile, themes: Sequence[Sequence[int]], n_examples: int = 3) -> list[ThemeRows]:
    """Support, mean score and representative rows of each theme (concept-id lists), in one pass."""
    if not themes:
        return []
    members = [np.unique(np.asarray(t, dtype=np.int32)) for t in themes]
    support = np.zeros(len(themes), np.int64)
    score_sum = np.zeros(len(themes))
    n_scored = np.zeros(len(themes), np.int64)
    top = TopK(n_examples)
    for batch in iter_row_batches(rows):
        row_of = np.repeat(np.arange(len(batch)), np.diff(batch.offsets))
        scored = ~np.isnan(batch.scores)
        for t, ids in enumerate(members):
            hit = np.isin(batch.concept_ids, ids)
            sums = np.bincount(row_of[hit], weights=batch.concept_acts[hit], minlength=len(batch))
            active = sums > 0
            support[t] += int(active.sum())
            score_sum[t] += float(batch.scores[active & scored].sum())
            n_scored[t] += int((active & scored).sum())
            local = np.flatnonzero(active)
            top.add(np.full(local.size, t), sums[local], batch.first_row + local)
    return [
        ThemeRows(int(support[t]), float(score_sum[t] / n_scored[t]) if n_scored[t] else None, top.of(t))
        for t in range(len(themes))
    ]


def theme_name(members: Sequence[int], enrichment: Mapping[int, Sequence[str]], descriptions: Mapping[int, str]) -> str:
    """A name without an LLM: the metadata value most members are enriched in, else the first member's
    description (members come most-active first)."""
    counts = Counter(e.split(" (×")[0] for c in members for e in enrichment.get(c, [])[:1])
    if counts:
        value, n = counts.most_common(1)[0]
        if n >= 2 or len(members) == 2:
            return f"Rows with {value.replace('=', ' = ')}"
    return descriptions.get(members[0], f"Concept {members[0]}").rstrip(".")
