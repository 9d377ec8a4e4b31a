"""Readable descriptions in the profiles: taken from `descriptions.parquet` when a run directory has one.

The "readable gaps" analysis writes `descriptions.parquet` (`concept_id: int32`, `description: string`,
`metadata_enrichment: list<string>`) into a run directory. Profiles built after it exists take both columns
from it; `described_profiles(run, table)` gives the existing profile files with them when it appears
later (`cg-ray describe` writes those back as one step). Until then,
`description` is the concept's label (or "concept N (no label)") and `metadata_enrichment` is empty.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.errors import InputError

Descriptions = dict[int, tuple[str | None, list[str]]]


def load_descriptions(run: RunDir) -> Descriptions | None:
    """RUN/descriptions.parquet as {concept_id: (description, metadata_enrichment)}; None when absent."""
    path = run.file(S.DESCRIPTIONS_FILE)
    if not path.exists():
        return None
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"not a Parquet file ({exc})", path=str(path)) from None
    return descriptions_of(table, path)


def descriptions_of(table: pa.Table, path: Path) -> Descriptions:
    """{concept_id: (description, metadata_enrichment)} of a descriptions table (`path` names it in errors)."""
    for f in S.DESCRIPTIONS_READ_SCHEMA:
        if f.name not in table.column_names:
            raise InputError(f"missing column (present: {table.column_names})", path=str(path), field=f.name)
    try:
        table = table.select(S.DESCRIPTIONS_READ_SCHEMA.names).cast(S.DESCRIPTIONS_READ_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputError(
            f"unexpected column types ({exc}); expected {S.DESCRIPTIONS_READ_SCHEMA}", path=str(path)
        ) from None
    out: Descriptions = {}
    for cid, desc, enrichment in zip(
        table.column("concept_id").to_pylist(),
        table.column("description").to_pylist(),
        table.column("metadata_enrichment").to_pylist(),
        strict=True,
    ):
        out[int(cid)] = (desc, [str(x) for x in enrichment or [] if x is not None])
    return out


def with_descriptions(table: pa.Table, descriptions: Descriptions) -> pa.Table:
    """A profile table whose `description` / `metadata_enrichment` come from `descriptions` where it has them."""
    ids = table.column("concept_id").to_pylist()
    old_desc = table.column("description").to_pylist()
    old_meta = table.column("metadata_enrichment").to_pylist()
    new_desc = [descriptions[c][0] if c in descriptions else d for c, d in zip(ids, old_desc, strict=True)]
    new_meta = [descriptions[c][1] if c in descriptions else m for c, m in zip(ids, old_meta, strict=True)]
    table = table.set_column(
        table.schema.get_field_index("description"),
        S.PROFILE_SCHEMA.field("description"),
        pa.array(new_desc, pa.string()),
    )
    return table.set_column(
        table.schema.get_field_index("metadata_enrichment"),
        S.PROFILE_SCHEMA.field("metadata_enrichment"),
        pa.array(new_meta, pa.list_(pa.string())),
    )


def described_profiles(run: RunDir, descriptions: pa.Table) -> dict[str, pa.Table]:
    """The run's profile files with their descriptions taken from `descriptions` (those the run has)."""
    found = descriptions_of(descriptions, run.file(S.DESCRIPTIONS_FILE))
    return {
        name: with_descriptions(table, found) for name in S.PROFILE_FILES if (table := run.read_table(name)) is not None
    }
