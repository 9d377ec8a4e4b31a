"""A run keeps every gap it has probed (docs/probe.md, "Probing one gap after another").

A new probe replaces the earlier pairs and verdicts of the gaps it names and keeps those of every other gap
an earlier probe of the run judged. All of them are then judged again as one family: the Benjamini–Hochberg
q-values run over every gap the run has probed, so probing gaps one at a time does not buy a looser rule
than probing them together. A kept gap's verdict can change that way (more gaps tested, larger q); the probe
says which did. `cg-ray probe --replace` forgets the earlier probes instead.

Read from the published probe/ files only: the pairs are rebuilt from items.parquet (the kept, answered
items), the run's effect and the pairs dropped from results.parquet.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.probe.confirm import PAIR_COLUMNS, GapConfirmation
from cg_ray.probe.items import ItemPair

# Each results row says which probe of the run wrote its pairs, with that probe's seed (a next step draws
# a new one) and when it finished.
PROBE_COLUMNS = ("probe", "probe_seed", "probed_at")
_VERDICT_FIELDS = [f for f in GapConfirmation.__dataclass_fields__ if f != "gap_id"]


@dataclass
class Earlier:
    """What the run's earlier probes judged, for the gaps this probe does not name."""

    results: list[dict[str, Any]] = field(default_factory=list)  # results.parquet rows, in their order
    items: pa.Table | None = None  # their items.parquet rows
    pairs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PAIR_COLUMNS)))
    probes: list[dict[str, Any]] = field(default_factory=list)  # summary.json's "probes", oldest first

    @property
    def gap_ids(self) -> list[str]:
        return [r["gap_id"] for r in self.results]

    def effects(self) -> dict[str, float | None]:
        return {r["gap_id"]: r.get("run_effect") for r in self.results}

    def dropped(self) -> dict[str, int]:
        return {r["gap_id"]: int(r.get("n_dropped") or 0) for r in self.results}


def read_earlier(run: RunDir, probing: set[str], *, replace: bool = False) -> Earlier:
    """The earlier probes' gaps outside `probing` (none with `replace`, or when the run was never probed)."""
    summary = run.read_json_if_present(L.PROBE_SUMMARY) or {}
    results = run.read_table(L.PROBE_RESULTS)
    if replace or results is None:
        return Earlier()
    probes = list(summary.get("probes") or [_first_probe(summary)])
    kept = [r for r in results.to_pylist() if r["gap_id"] not in probing]
    for r in kept:  # results written before probes were numbered came from one probe, the first
        r.setdefault("probe", 1)
        r.setdefault("probe_seed", (summary.get("config") or {}).get("seed"))
        r.setdefault("probed_at", probes[0].get("at"))
    items = run.read_table(L.PROBE_ITEMS)
    if items is not None:
        items = items.filter(pc.is_in(items["gap_id"], pa.array([r["gap_id"] for r in kept], pa.string())))
    return Earlier(kept, items, answered_pairs(items), probes)


def _first_probe(summary: dict[str, Any]) -> dict[str, Any]:
    config = summary.get("config") or {}
    gaps = [g["gap_id"] for g in summary.get("gaps") or []]
    return {"probe": 1, "at": None, "gaps": gaps, "pairs": config.get("pairs"), "seed": config.get("seed")}


def answered_pairs(items: pa.Table | None) -> pd.DataFrame:
    """PAIR_COLUMNS of every pair both of whose items were kept and scored (as `tables.pair_scores` made them)."""
    if items is None or items.num_rows == 0:
        return pd.DataFrame(columns=list(PAIR_COLUMNS))
    frame = items.filter(pc.is_null(items["dropped"])).to_pandas()
    frame = frame[frame["score"].notna()]
    wide = frame.pivot_table(index=["gap_id", "pair_id", "request_id"], columns="role", values="score")
    wide = wide.dropna(subset=[c for c in ("target", "control") if c in wide.columns])
    if not {"target", "control"} <= set(wide.columns):
        return pd.DataFrame(columns=list(PAIR_COLUMNS))
    wide = wide.rename(columns={"target": "target_score", "control": "control_score"}).reset_index()
    return pd.DataFrame(wide[list(PAIR_COLUMNS)])


def verified_pairs(items: pa.Table | None) -> list[ItemPair]:
    """The earlier probes' answered pairs as ItemPairs, for the export (which holds every gap's items)."""
    if items is None:
        return []
    kept = items.filter(pc.is_null(items["dropped"])).to_pylist()
    by_pair: dict[str, dict[str, dict[str, Any]]] = {}
    for item in kept:
        by_pair.setdefault(item["pair_id"], {})[item["role"]] = item
    pairs = []
    for pair_id, roles in by_pair.items():
        t, c = roles.get("target"), roles.get("control")
        if t is None or c is None:
            continue
        pairs.append(
            ItemPair(gap_id=t["gap_id"], pair_id=pair_id, generator=t["generator"], request_id=t["request_id"],
                     seed=int(t["seed"]), target_prompt=t["prompt"], target_reference=t["reference"],
                     control_prompt=c["prompt"], control_reference=c["reference"], scorer=t["scorer"])
        )  # fmt: skip
    return pairs


def this_probe(earlier: Earlier, gaps: list[str], pairs: int, seed: int) -> dict[str, Any]:
    """This probe's entry of summary.json's "probes": the next number, when, which gaps, pairs and seed."""
    number = max((int(p.get("probe") or 0) for p in earlier.probes), default=0) + 1
    at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return {"probe": number, "at": at, "gaps": gaps, "pairs": pairs, "seed": seed}


def rejudged(earlier: Earlier, verdicts: list[GapConfirmation]) -> list[dict[str, Any]]:
    """The earlier gaps' rows with their verdicts of the joint judgement, and each whose verdict changed."""
    by_id = {v.gap_id: v for v in verdicts}
    rows = []
    for r in earlier.results:
        v = by_id[r["gap_id"]]
        rows.append({**r, "verdict_before": r["verdict"], **{k: getattr(v, k) for k in _VERDICT_FIELDS}})
    return rows


def merged_results(new: pa.Table, entry: dict[str, Any], carried: list[dict[str, Any]]) -> pa.Table:
    """This probe's rows (numbered as `entry`) then the kept rows, ranked in that order."""
    numbered = {"probe": entry["probe"], "probe_seed": entry["seed"], "probed_at": entry["at"]}
    rows = [r | numbered for r in new.to_pylist()]
    rows += [{k: v for k, v in r.items() if k != "verdict_before"} for r in carried]
    for rank, r in enumerate(rows, start=1):
        r["rank"] = rank
    # Types from every row's values: a column all null in this probe (every gap too_few) is typed by the kept.
    columns = list(dict.fromkeys([*new.schema.names, *PROBE_COLUMNS]))
    return pa.table({c: pa.array([r.get(c) for r in rows]) for c in columns})


def merged_items(new: pa.Table, number: int, earlier: Earlier) -> pa.Table:
    """This probe's items (numbered) then the kept gaps' items, each with the probe that wrote it."""
    mine = new.append_column("probe", pa.array([number] * new.num_rows, pa.int64()))
    if earlier.items is None or earlier.items.num_rows == 0:
        return mine
    old = earlier.items
    if "probe" not in old.schema.names:
        of_gap = {r["gap_id"]: int(r["probe"]) for r in earlier.results}
        old = old.append_column("probe", pa.array([of_gap.get(g, 1) for g in old["gap_id"].to_pylist()], pa.int64()))
    return pa.concat_tables([mine, old.select(mine.schema.names).cast(mine.schema)])


def changes_text(carried: list[dict[str, Any]], tested: int) -> list[str]:
    """One line per kept gap whose verdict the joint judgement changed."""
    return [
        f"{r['gap_id']} (probe {r['probe']}): {r['verdict_before']} → {r['verdict']} with q over the {tested} "
        "gaps this run has tested"
        for r in carried
        if r["verdict"] != r["verdict_before"]
    ]
