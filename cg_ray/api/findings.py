"""A run's judged findings in one long table (`Run.findings`): failure modes, slices and the profile's
concepts, each with the held-out estimate it was judged on and its verdict.

Each kind keeps its own columns in its own file (failure_modes.parquet, slices.parquet, weaknesses.parquet,
strengths.parquet; column names in `cg_ray.schemas`); this table puts the columns a notebook compares across
kinds side by side: which finding, its size, the held-out estimate with its interval, and the verdict
(`S.VERDICT_FIELDS`). Every estimate is a held-out difference in score (a slice's: its mean minus the other
held-out rows' mean), so its interval lies on the tested side of 0 whenever the finding is confirmed
(above 0 for a strength, below for every other kind; one that just missed can too). A table written before
findings were judged held out (no `confirmed` column) adds no rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from cg_ray import schemas as S

VERDICT_COLUMNS: tuple[str, ...] = tuple(f.name for f in S.VERDICT_FIELDS)
COLUMNS: tuple[str, ...] = (
    "kind",
    "rank",
    "finding",
    "concept_ids",
    "n_rows",
    "measure",
    "estimate",
    "low",
    "high",
    *VERDICT_COLUMNS,
    "example_row_ids",
)


@dataclass(frozen=True)
class Kind:
    """Where one kind of finding lives and which of its columns hold the held-out estimate."""

    kind: str  # the value of the `kind` column
    file: str  # its table in the run directory
    finding: str  # the column that says what it is, in words
    estimate: tuple[str, str, str]  # held-out estimate, its low and high end
    measure: str  # what the estimate is, in words (the `measure` column)
    baseline: str | None = None  # a column subtracted from the three estimate columns


KINDS: tuple[Kind, ...] = (
    Kind(
        "failure_mode",
        S.FAILURE_MODES_FILE,
        "description",
        ("heldout_residual", "heldout_residual_low", "heldout_residual_high"),
        "held-out residual: mean score of the mode's rows minus their cells' expected score",
    ),
    Kind(
        "slice",
        S.SLICES_FILE,
        "slice",
        ("mean_score", "low", "high"),
        "held-out mean score of the slice minus the other held-out rows' (slices.parquet's mean_score − "
        "suite_mean; an end clipped to the score scale there stays clipped)",
        baseline="suite_mean",
    ),
    Kind(
        "weakness",
        S.WEAKNESSES_FILE,
        "description",
        ("heldout_residual", "heldout_residual_low", "heldout_residual_high"),
        "held-out residual gap of the concept's rows (below 0: weaker than their cells)",
    ),
    Kind(
        "strength",
        S.STRENGTHS_FILE,
        "description",
        ("heldout_residual", "heldout_residual_low", "heldout_residual_high"),
        "held-out residual gap of the concept's rows (above 0: stronger than their cells)",
    ),
)


def findings_table(tables: Mapping[str, pd.DataFrame | None], *, confirmed_only: bool) -> pd.DataFrame:
    """One row per judged finding of `tables` (file name -> its table, None when the run has none), the
    confirmed ones only unless `confirmed_only` is False; within a kind in the file's rank order."""
    parts = [_rows(kind, tables.get(kind.file)) for kind in KINDS]
    found = [p for p in parts if not p.empty]
    if not found:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    out = pd.concat(found, ignore_index=True)
    if confirmed_only:
        out = out[out["confirmed"]].reset_index(drop=True)
    return out


def _rows(kind: Kind, table: pd.DataFrame | None) -> pd.DataFrame:
    if table is None or "confirmed" not in table.columns:
        return pd.DataFrame()
    judged = table[table["q_value"].notna()] if "q_value" in table.columns else table.iloc[:0]
    if judged.empty:
        return pd.DataFrame()
    shift = judged[kind.baseline] if kind.baseline else 0.0
    mid, low, high = (judged[c] - shift for c in kind.estimate)
    names = judged[kind.finding] if kind.finding in judged.columns else pd.Series(None, index=judged.index)
    if "label" in judged.columns:  # a concept without a description is named by its label
        names = names.fillna(judged["label"])
    if "concept_ids" in judged.columns:
        concepts = judged["concept_ids"].map(list)
    elif "members" in judged.columns:
        concepts = judged["members"].map(list)
    else:
        concepts = pd.Series([[] for _ in range(len(judged))], index=judged.index)
    return pd.DataFrame(
        {
            "kind": kind.kind,
            "rank": judged["rank"],
            "finding": names,
            "concept_ids": concepts,
            "n_rows": judged["n_rows"],
            "measure": kind.measure,
            "estimate": mid,
            "low": low,
            "high": high,
            **{c: judged[c] for c in VERDICT_COLUMNS},
            "example_row_ids": judged["example_row_ids"].map(list),
        }
    ).reset_index(drop=True)
