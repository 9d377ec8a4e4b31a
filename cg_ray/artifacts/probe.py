"""The probe's records as typed values (`cg-ray probe`, docs/probe.md): one reader of RUN/probe/results.parquet
(`read_probe_results`, checked once against schemas.probe.PROBE_RESULTS_SCHEMA), of probe/summary.json
(`read_probe_summary`) and of probe/items.parquet (`read_probe_items`, a checked table), used by the probe's
history, the service and the report alike, so none of them indexes columns or keys of its own. A file whose
columns are not the probe's is refused naming the file and field.

Here, below the probe and the report in the layers, so that both read the same records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import pyarrow as pa

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.errors import InputError
from cg_ray.schemas.probe import (
    PROBE_ITEMS_FILE_SCHEMA,
    PROBE_ITEMS_FILLED,
    PROBE_ITEMS_SCHEMA,
    PROBE_RESULTS_REQUIRED,
    PROBE_RESULTS_SCHEMA,
)


@dataclass(frozen=True)
class ProbeResult:
    """One row of results.parquet: one attempt at one gap (schemas.probe.PROBE_RESULTS_SCHEMA says each
    field). None where the attempt has no value, or an older file no such column."""

    gap_id: str
    verdict: str = ""  # the file's column is never null (the reader refuses it)
    n_pairs: int = 0
    rank: int | None = None
    kind: str | None = None
    description: str | None = None
    concept_ids: list[int] | None = None
    run_confirmed: bool | None = None
    run_rows: int | None = None
    generator: str | None = None
    requests: int | None = None
    writer_requests_replaced: int | None = None
    malformed: int | None = None
    wrong_reference: int | None = None
    pairs_written: int | None = None
    near_copies: int | None = None
    reader_checked: int | None = None
    reader_passed: int | None = None
    reader_pass_rate: float | None = None
    writer_note: str | None = None
    n_clusters: int | None = None
    n_dropped: int | None = None
    target_mean: float | None = None
    control_mean: float | None = None
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    q_value: float | None = None
    run_effect: float | None = None
    mde: float | None = None
    pairs_needed: int | None = None
    method: str | None = None
    note: str | None = None
    fdr_share: float | None = None
    pairs_to_write: int | None = None
    planned_effect: float | None = None
    probe: int | None = None  # None: written before probes were numbered (probe 1's)
    probe_seed: int | None = None
    probed_at: str | None = None
    standing: str | None = None

    def row(self) -> dict[str, Any]:
        """The record as a results.parquet row (the schema's column order)."""
        mine = asdict(self)
        return {name: mine[name] for name in PROBE_RESULTS_SCHEMA.names}


RESULT_FIELDS = frozenset(f.name for f in fields(ProbeResult))


def probe_result(row: Mapping[str, Any]) -> ProbeResult:
    """The record of one results row (a summary.json `gaps` entry, or a row the probe is about to write); keys
    it lacks are None."""
    return ProbeResult(**{k: v for k, v in row.items() if k in RESULT_FIELDS})


@dataclass(frozen=True)
class ProbeEntry:
    """One probe of the run, as summary.json's `probes` lists them (cg_ray.probe.history.this_probe)."""

    probe: int
    at: str | None = None  # when it finished (ISO 8601, UTC)
    gaps: tuple[str, ...] = ()
    pairs: int | None = None
    seed: int | None = None
    fdr: float | None = None  # None: written before the fdr was spent per probe
    share: float | None = None
    forgotten: bool = False  # `--replace` dropped its attempts (not its number)
    ledger: str | None = None  # the probe ledger that numbered it (cg_ray.probe.ledger); None: before ledgers
    keys: tuple[str, ...] = ()  # each gap's key there, in the order of `gaps`

    def document(self) -> dict[str, Any]:
        """The entry as summary.json holds it: fdr, share and the ledger only where known, forgotten only when
        true."""
        out: dict[str, Any] = {"probe": self.probe, "at": self.at, "gaps": list(self.gaps), "pairs": self.pairs,
                               "seed": self.seed}  # fmt: skip
        known = (("fdr", self.fdr), ("share", self.share), ("ledger", self.ledger))
        out |= {k: v for k, v in known if v is not None} | ({"keys": list(self.keys)} if self.keys else {})
        return out | ({"forgotten": True} if self.forgotten else {})


ENTRY_FIELDS = frozenset(f.name for f in fields(ProbeEntry))


@dataclass(frozen=True)
class ProbeSummary:
    """probe/summary.json (artifacts.contract.ProbeSummary) with typed attempts and probes."""

    gaps: tuple[ProbeResult, ...]  # every attempt, as results.parquet
    requests: dict[str, Any]  # writer, family draws, malformed, wrong references, model
    seconds: dict[str, float]  # per step
    probes: tuple[ProbeEntry, ...]  # every probe of the run, oldest first
    config: dict[str, Any]  # the latest probe's settings (ProbeConfig)
    decision: str = ""
    exports: tuple[str, ...] = ()
    run: str = ""


def probe_summary(document: Mapping[str, Any]) -> ProbeSummary:
    """The typed summary of a summary.json document (keys it lacks are empty)."""
    probes = [
        ProbeEntry(
            **{k: v for k, v in p.items() if k in ENTRY_FIELDS}
            | {"gaps": tuple(p.get("gaps") or ()), "keys": tuple(p.get("keys") or ())}
        )
        for p in document.get("probes") or []
    ]
    return ProbeSummary(
        gaps=tuple(probe_result(g) for g in document.get("gaps") or []),
        requests=dict(document.get("requests") or {}),
        seconds=dict(document.get("seconds") or {}),
        probes=tuple(probes),
        config=dict(document.get("config") or {}),
        decision=document.get("decision") or "",
        exports=tuple(document.get("exports") or ()),
        run=document.get("run") or "",
    )


def read_probe_summary(run: RunDir) -> ProbeSummary | None:
    """The run's probe/summary.json (None when it was never probed)."""
    document = run.read_json_if_present(L.PROBE_SUMMARY)
    return None if document is None else probe_summary(document)


def _readable_as(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether a column of type `have` holds values of `want` (all null; an integer where a float is due)."""
    if have == want or pa.types.is_null(have):
        return True
    if pa.types.is_integer(want):
        return bool(pa.types.is_integer(have))
    if pa.types.is_floating(want):
        return bool(pa.types.is_integer(have) or pa.types.is_floating(have))
    if pa.types.is_list(want) and (pa.types.is_list(have) or pa.types.is_large_list(have)):
        return _readable_as(have.value_type, want.value_type)
    return bool(pa.types.is_string(want) and pa.types.is_large_string(have))


def conformed(
    table: pa.Table, schema: pa.Schema, required: tuple[str, ...], filled: tuple[str, ...], path: str
) -> pa.Table:
    """A probe table read from `path` in `schema`, its columns checked once: a `required` column missing, a
    `filled` one null, or any column of another type is refused naming the file and field; a column an older
    file lacks reads as null."""
    for name in required:
        if name not in table.schema.names:
            raise InputError("missing column of the probe's table", path=path, field=name)
    for name in filled:
        if table[name].null_count:
            row = table[name].is_null().to_pylist().index(True)
            raise InputError("null in a column the probe always fills", path=path, row=row, field=name)
    columns = {}
    for want in schema:
        if want.name not in table.schema.names:
            columns[want.name] = pa.nulls(table.num_rows, want.type)
            continue
        column = table[want.name]
        if not _readable_as(column.type, want.type):
            raise InputError(f"column is {column.type}, expected {want.type}", path=path, field=want.name)
        columns[want.name] = column.cast(want.type)
    return pa.table(columns, schema=schema)


def read_probe_results_table(run: RunDir) -> pa.Table | None:
    """The run's probe/results.parquet in PROBE_RESULTS_SCHEMA, checked (`conformed`: gap_id, verdict and
    n_pairs always there); None when the run was never probed."""
    table = run.read_table(L.PROBE_RESULTS)
    if table is None:
        return None
    required = PROBE_RESULTS_REQUIRED
    return conformed(table, PROBE_RESULTS_SCHEMA, required, required, str(run.file(L.PROBE_RESULTS)))


def read_probe_items(run: RunDir) -> pa.Table | None:
    """The run's probe/items.parquet in PROBE_ITEMS_FILE_SCHEMA, checked (`conformed`: every column but `probe`,
    which items written before probes were numbered lack, is required); None when the run was never probed."""
    table = run.read_table(L.PROBE_ITEMS)
    if table is None:
        return None
    required = tuple(PROBE_ITEMS_SCHEMA.names)
    return conformed(table, PROBE_ITEMS_FILE_SCHEMA, required, PROBE_ITEMS_FILLED, str(run.file(L.PROBE_ITEMS)))


def read_probe_results(run: RunDir) -> list[ProbeResult] | None:
    """Every attempt in the run's probe/results.parquet, in its order (None when the run was never probed)."""
    table = read_probe_results_table(run)
    return None if table is None else [ProbeResult(**row) for row in table.to_pylist()]
