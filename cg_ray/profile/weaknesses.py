"""The weakness profile of a run: `weaknesses.parquet`, `strengths.parquet`, `coverage_gaps.parquet`.

One row per reported concept, in rank order (schema `cg_ray.schemas.PROFILE_SCHEMA`). Each list takes the
head of its order (`ranking.py`) — a pool of `POOL_FACTOR × top_k` concepts — merges near-duplicates within
the pool (`grouping.py`), and keeps the first `top_k` entries. An entry shows its representative's values
and lists the merged concept ids in `members`; `group` is the representative's concept id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.rows import open_rows
from cg_ray.labels import ConceptLabels
from cg_ray.metrics.compute import CGResult
from cg_ray.profile.decision import Alternative, not_tested
from cg_ray.profile.descriptions import Descriptions, load_descriptions
from cg_ray.profile.findings import slices_file, verdict_columns
from cg_ray.profile.grouping import PoolActivity, group_near_duplicates, pool_activity_from_rows
from cg_ray.profile.judgement import Judgement
from cg_ray.profile.ranking import coverage_gap_order, strength_order, weakness_order

POOL_FACTOR = 4  # candidates compared for near-duplicates per reported entry


@dataclass(frozen=True)
class Entry:
    concept: int  # the representative
    members: list[int]  # merged concepts, representative first


def profile_entries(
    order: npt.NDArray[np.int64],
    activity: PoolActivity | None,
    support: npt.NDArray[np.float64],
    top_k: int,
    threshold: float,
) -> list[Entry]:
    """Merge near-duplicates within the head of `order` and return the first `top_k` entries in rank order."""
    pool = order[: POOL_FACTOR * top_k]
    if activity is None or pool.size == 0:
        return [Entry(int(c), [int(c)]) for c in pool[:top_k]]
    rep = group_near_duplicates(activity.jaccard(pool.tolist()), support[pool], threshold)
    members: dict[int, list[int]] = {}
    for slot in np.argsort(-np.nan_to_num(support[pool], nan=-1.0), kind="stable"):
        members.setdefault(int(rep[slot]), []).append(int(pool[slot]))
    entries = [Entry(int(pool[r]), members[r]) for r in sorted(members)]  # by the representative's rank
    return entries[:top_k]


def _f(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def profile_table(
    entries: list[Entry],
    result: CGResult,
    labels: ConceptLabels | None,
    activity: PoolActivity | None,
    descriptions: Descriptions | None = None,
    beyond: Judgement | None = None,
    direction: Alternative = "less",
) -> pa.Table:
    u = result.uncertainty
    records: list[dict[str, Any]] = []
    for rank, e in enumerate(entries, start=1):
        c = e.concept
        label = labels.get(c) if labels else None
        terms = beyond.terms.get(c) if beyond else None
        description: str | None = label or (terms.sentence() if terms else None) or f"concept {c} (no label)"
        enrichment: list[str] = []
        if descriptions and c in descriptions:
            description, enrichment = descriptions[c]
        records.append(
            {
                "rank": rank,
                "concept_id": c,
                "label": label,
                "description": description,
                "X_model": _f(result.X_model[c]),
                **{name: _f(getattr(u, name)[c]) for name in S.INTERVAL_COLUMNS},
                "n_rows": int(result.n_active_rows[c]),
                "n_eff": _f(u.concept_n_eff[c]),
                # the rule a probe's reader check applies to new items (null without a judgement)
                "firing_threshold": beyond.firing_thresholds.get(c) if beyond else None,
                "n_benchmarks": int(result.n_benchmarks_active[c]),
                "group": c,
                "members": e.members,
                "metadata_enrichment": enrichment,
                "example_row_ids": activity.example_row_ids(c) if activity is not None else [],
                **residual_values(beyond, c),
                "terms": terms.terms if terms else None,
                **heldout_values(beyond, c, direction),
            }
        )
    return pa.Table.from_pylist(records, schema=S.PROFILE_SCHEMA)


def residual_values(beyond: Judgement | None, c: int) -> dict[str, Any]:
    """The residual columns of concept c (nulls without a beyond-the-metadata analysis)."""
    if beyond is None:
        return {
            "in_sample_residual": None,
            "in_sample_residual_low": None,
            "in_sample_residual_high": None,
            "adjusted_for": None,
        }
    r = beyond.residuals
    return {
        "in_sample_residual": _f(r.residual[c]),
        "in_sample_residual_low": _f(r.low[c]),
        "in_sample_residual_high": _f(r.high[c]),
        "adjusted_for": beyond.adjusted_for,
    }


def heldout_values(beyond: Judgement | None, c: int, direction: Alternative) -> dict[str, Any]:
    """Concept c's held-out residual and verdict in the list's direction (below its cells for weaknesses
    and coverage gaps, above for strengths); nulls and not confirmed when no split made it a candidate."""
    v = beyond.concept_verdict(c, direction) if beyond is not None else not_tested()
    return {
        "heldout_residual": v.estimate,
        "heldout_residual_low": v.low,
        "heldout_residual_high": v.high,
        **verdict_columns(v),
        "p_value": v.p_value if v.splits_selected else None,
        "q_value": v.q_value if v.splits_selected else None,
    }


@dataclass(frozen=True)
class ProfileChoice:
    """The entries each profile list shows (near-duplicates merged), chosen from the metrics alone, before any
    finding is judged: the judgement describes their concepts (`judgement.judge`'s `describe`)."""

    entries: dict[str, list[Entry]]  # file name → entries in rank order
    activity: PoolActivity | None  # the pools' rows (near-duplicates, example rows)

    @property
    def concepts(self) -> list[int]:
        return sorted({e.concept for listed in self.entries.values() for e in listed})


def choose_profiles(result: CGResult, rows_path: Path | None, model: str | None = None) -> ProfileChoice:
    """The three lists' entries. Reads rows.parquet once (pool activity) when given."""
    cfg = result.config
    orders = {
        S.WEAKNESSES_FILE: weakness_order(result),
        S.STRENGTHS_FILE: strength_order(result),
        S.COVERAGE_GAPS_FILE: coverage_gap_order(result),
    }
    pool = np.unique(np.concatenate([o[: POOL_FACTOR * cfg.top_k] for o in orders.values()]))
    activity = None
    if rows_path is not None and rows_path.exists() and pool.size:
        activity = pool_activity_from_rows(open_rows(rows_path, result.d_sae), pool.tolist(), model)
    support = result.uncertainty.concept_n_eff
    coverage_support = result.n_active_rows.astype(np.float64)  # coverage gaps: many have no scored rows
    entries = {
        name: profile_entries(
            order,
            activity,
            coverage_support if name == S.COVERAGE_GAPS_FILE else support,
            cfg.top_k,
            cfg.duplicate_jaccard,
        )
        for name, order in orders.items()
    }
    return ProfileChoice(entries, activity)


def build_profiles(
    result: CGResult,
    labels: ConceptLabels | None,
    choice: ProfileChoice,
    descriptions: Descriptions | None = None,
    judgement: Judgement | None = None,
) -> dict[str, pa.Table]:
    """The three profile tables, keyed by file name, with each entry's held-out verdict and terms from
    `judgement` (made with `describe=choice.concepts`)."""
    return {
        name: profile_table(
            listed,
            result,
            labels,
            choice.activity,
            descriptions,
            judgement,
            "greater" if name == S.STRENGTHS_FILE else "less",
        )
        for name, listed in choice.entries.items()
    }


def write_profiles(
    run: RunDir,
    result: CGResult,
    labels: ConceptLabels | None,
    choice: ProfileChoice,
    judgement: Judgement | None = None,
) -> dict[str, Any]:
    """Write the three profile files into `run` (a directory being published atomically), and with a
    `judgement` slices.parquet and failure_modes.parquet; a summary back."""
    tables = build_profiles(result, labels, choice, load_descriptions(run), judgement)
    for name, table in tables.items():
        run.write(name, table)
    if judgement is not None:
        run.write(S.SLICES_FILE, slices_file(judgement.frame, judgement.slice_findings))
        run.write(S.FAILURE_MODES_FILE, judgement.modes)
    weak = tables[S.WEAKNESSES_FILE]
    return {
        "rank_by": result.config.rank_by,
        "duplicate_jaccard": result.config.duplicate_jaccard,
        "pool_factor": POOL_FACTOR,
        "confidence": result.uncertainty.confidence,
        "counts": {name.removesuffix(".parquet"): t.num_rows for name, t in tables.items()},
        "n_merged": int(sum(len(m) - 1 for m in weak.column("members").to_pylist())),
        **({"beyond": judgement.summary()} if judgement is not None else {}),
    }
