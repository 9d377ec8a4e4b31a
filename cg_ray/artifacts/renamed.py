"""Columns the run layout renamed, and the one place a table of an older run is read under the new names.

Run format 3 (`RunSummary.version`) names each residual for what it holds: `heldout_residual` (+ _low /
_high) on rows that did not choose the finding, `in_sample_residual` (+ _low / _high) over every row.
Format 2 and older said `residual` for the held-out figure in failure_modes.parquet but for the in-sample
one in concepts.parquet and the profiles. `ArtifactDir.read_table` renames those old columns on read
(`RunDir.RENAMED`, `ArenaDir.RENAMED`; the concept tables the report and the service read whole go through
`read_renamed` too), so `cg_ray.read_run`, the service's stored analyses, the report, sensitivity,
describe and the arena all see one layout. A table of the new layout holds none of the
old names, so renaming the ones a file holds is the whole check; a table rewritten after the rename (a
`cg-ray describe` of an old run) is written under the new names. The same goes for a key: the judgement of
summary.json's profile.beyond (and validate.json's beyond) was `crossfit` before format 3; `judgement_in`
is the one reader, for the report, the CLI, validate and sensitivity. sensitivity/findings.parquet changed
values as well as names (format 2 of its summary.json): `sensitivity_findings` reads an older one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S


def _interval(old: str, new: str) -> dict[str, str]:
    return {old: new, f"{old}_low": f"{new}_low", f"{old}_high": f"{new}_high"}


_PROFILE: Final = _interval("residual", "in_sample_residual") | _interval("residual_heldout", "heldout_residual")

# file -> old column -> new column, for the tables of a run directory of format 2 or older.
RUN_COLUMNS: Final[Mapping[str, Mapping[str, str]]] = {
    S.FAILURE_MODES_FILE: _interval("residual", "heldout_residual") | {"residual_in_sample": "in_sample_residual"},
    S.CONCEPTS_FILE: _interval("residual", "in_sample_residual"),
    S.WEAKNESSES_FILE: _PROFILE,
    S.STRENGTHS_FILE: _PROFILE,
    S.COVERAGE_GAPS_FILE: _PROFILE,
}
# The same for an arena's model_concepts.parquet (and head_to_head.json's `model_concepts` entries).
ARENA_COLUMNS: Final[Mapping[str, Mapping[str, str]]] = {
    S.MODEL_CONCEPTS_FILE: _interval("residual_heldout", "heldout_residual")
}


def read_renamed(path: Path, columns: list[str] | None, renamed: Mapping[str, str]) -> pa.Table:
    """The Parquet file at `path` (only `columns`, named the new way, when given) with its old columns
    (`renamed`: old -> new) under their new names."""
    if not renamed:
        return pq.read_table(path, columns=columns)
    present = {old: new for old, new in renamed.items() if old in pq.read_schema(path).names}
    back = {new: old for old, new in present.items()}
    table = pq.read_table(path, columns=None if columns is None else [back.get(c, c) for c in columns])
    return table.rename_columns([present.get(c, c) for c in table.column_names]) if present else table


def renamed_record(record: Mapping[str, Any], renamed: Mapping[str, str]) -> dict[str, Any]:
    """A row of such a table as a JSON document holds it, under the new names."""
    return {renamed.get(key, key): value for key, value in record.items()}


def judgement_in(beyond: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A `beyond` block's `judgement` (summary.json's profile.beyond, validate.json's beyond): how the findings
    were judged. Runs before format 3 called it `crossfit`; None for a run made before held-out checks."""
    judged = (beyond or {}).get("judgement") or (beyond or {}).get("crossfit")
    return dict(judged) if judged else None


def judgement_of(summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """summary["profile"]["beyond"]'s judgement (`judgement_in`)."""
    return judgement_in(((summary or {}).get("profile") or {}).get("beyond"))


# sensitivity/findings.parquet of format 1 (its summary.json's format_version): "replicates" meant found by the
# other reader; `effect` was the run's rows re-tested on the halves that chose them, so its interval and
# `effect_confirmed` said a verdict the data could not give.
_SENSITIVITY_STATUS: Final = {"replicates": S.FOUND}
_SENSITIVITY_DROPPED: Final = ("effect_low", "effect_high", "effect_confirmed")


def sensitivity_findings(table: pa.Table) -> pa.Table:
    """sensitivity/findings.parquet under format 2's names: status "replicates" reads "found", `effect` reads
    `own_estimate` (the run's own estimate, no verdict); the figures format 1 did not record stay absent (not
    null: "no candidate" is a finding of its own). A table of format 2 comes back as it is."""
    if "effect" not in table.column_names:
        return table
    table = table.drop_columns([c for c in _SENSITIVITY_DROPPED if c in table.column_names])
    table = table.rename_columns(["own_estimate" if c == "effect" else c for c in table.column_names])
    status = [_SENSITIVITY_STATUS.get(v, v) for v in table["status"].to_pylist()]
    return table.set_column(table.column_names.index("status"), "status", pa.array(status, pa.string()))
