"""A run keeps every attempt of every gap it has probed (docs/probe.md, "Probing one gap after another").

Each probe is judged once, on its own fresh pairs, as its own family (`confirm.confirm_gaps`: Benjamini–Hochberg
at its share of `--fdr`, `power.share`); its verdicts are final. A later probe adds its rows to
results.parquet (one row per gap per probe, `probe` saying which) and never judges an earlier one again, so
the family of every probe is fixed before its verdicts are seen and re-probing a gap cannot buy a
confirmation. A gap's standing verdict (the `standing` column, the same on each of its rows) is `confirmed`
when any of its probes confirmed it, else its latest probe's verdict. An unsettled gap's latest attempt is
planned again at each probe for the run's next one (`replanned_rows`), so its pairs_needed is always the
next probe's. `cg-ray probe --replace` forgets the earlier probes' rows and items, but not their number: the
next probe still spends the share of its number, so forgetting cannot buy back the first probe's share.

Read from the published probe/ files only: an attempt's pairs are rebuilt from items.parquet (the kept,
answered items of its probe). Rows and items written before probes were numbered are probe 1's.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.probe import (
    ProbeEntry,
    ProbeResult,
    ProbeSummary,
    probe_result,
    probe_summary,
    read_probe_items,
    read_probe_results,
    read_probe_summary,
)
from cg_ray.probe.confirm import PAIR_COLUMNS, NextPlan, gap_test, plan_next
from cg_ray.probe.items import ItemPair
from cg_ray.probe.power import share
from cg_ray.probe.selection import Inflation
from cg_ray.schemas.probe import PROBE_NUMBER, PROBE_RESULTS_SCHEMA


@dataclass
class Earlier:
    """What the run's earlier probes judged: every attempt, final."""

    results: list[ProbeResult] = field(default_factory=list)  # results.parquet rows, in their order, numbered
    items: pa.Table | None = None  # their items.parquet rows, each with its probe
    probes: list[ProbeEntry] = field(default_factory=list)  # summary.json's "probes", oldest first

    def next_probe(self) -> int:
        """The number of the run's next probe: after every earlier one, forgotten ones included."""
        return max((p.probe for p in self.probes), default=0) + 1


def read_earlier(run: RunDir, *, replace: bool = False) -> Earlier:
    """The run's earlier probes (with `replace`, only their numbers; nothing when the run was never probed)."""
    summary = read_probe_summary(run) or probe_summary({})
    results = read_probe_results(run)
    if results is None:
        return Earlier()
    probes = list(summary.probes or [_first_probe(summary)])
    if replace:
        return Earlier(probes=[dataclasses.replace(p, forgotten=True) for p in probes])
    # Results written before probes were numbered came from one probe, the first.
    seed, at = summary.config.get("seed"), probes[0].at
    rows = [
        r
        if r.probe is not None
        else dataclasses.replace(r, probe=1, probe_seed=_first(r.probe_seed, seed), probed_at=at)
        for r in results
    ]
    items = read_probe_items(run)
    if items is not None and items["probe"].null_count:  # written before probes were numbered: its gap's row's
        of_gap = {r.gap_id: probe_of(r) for r in rows}
        given = zip(items["probe"].to_pylist(), items["gap_id"].to_pylist(), strict=True)
        numbers = [of_gap.get(g, 1) if k is None else k for k, g in given]
        items = items.set_column(items.schema.get_field_index("probe"), PROBE_NUMBER, pa.array(numbers, pa.int64()))
    return Earlier(rows, items, probes)


def _first(value: Any, otherwise: Any) -> Any:
    return otherwise if value is None else value


def probe_of(result: ProbeResult) -> int:
    """The probe that wrote an attempt (rows written before probes were numbered: the first)."""
    return 1 if result.probe is None else result.probe


def _first_probe(summary: ProbeSummary) -> ProbeEntry:
    config = summary.config
    gaps = tuple(g.gap_id for g in summary.gaps)
    return ProbeEntry(probe=1, at=None, gaps=gaps, pairs=config.get("pairs"), seed=config.get("seed"))


def answered_pairs(items: pa.Table | None) -> pd.DataFrame:
    """PAIR_COLUMNS and `probe` of every pair both of whose items were kept and scored (as
    `tables.pair_scores` made them)."""
    columns = [*PAIR_COLUMNS, "probe"]
    if items is None or items.num_rows == 0:
        return pd.DataFrame(columns=columns)
    frame = items.filter(pc.is_null(items["dropped"])).to_pandas()
    frame = frame[frame["score"].notna()]
    index = ["gap_id", "pair_id", "request_id", "probe"]
    wide = frame.pivot_table(index=index, columns="role", values="score")
    wide = wide.dropna(subset=[c for c in ("target", "control") if c in wide.columns])
    if not {"target", "control"} <= set(wide.columns):
        return pd.DataFrame(columns=columns)
    wide = wide.rename(columns={"target": "target_score", "control": "control_score"}).reset_index()
    return pd.DataFrame(wide[columns])


def verified_pairs(items: pa.Table | None) -> list[ItemPair]:
    """The earlier probes' answered pairs as ItemPairs, for the export (which holds every attempt's items)."""
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


def numbered_id(pair_id: str, gap_id: str, probe: int) -> str:
    """A pair's id in the run's items: as written in probe 1 (`gap/index`), `gap/probe-K/index` in probe K ≥ 2,
    so that every attempt's pairs stay apart in items.parquet and the export."""
    if probe == 1:
        return pair_id
    index = pair_id[len(gap_id) + 1 :] if pair_id.startswith(f"{gap_id}/") else pair_id
    return f"{gap_id}/probe-{probe}/{index}"


def numbered_pairs(pairs: list[ItemPair], probe: int) -> list[ItemPair]:
    return [dataclasses.replace(p, pair_id=numbered_id(p.pair_id, p.gap_id, probe)) for p in pairs]


def this_probe(
    number: int,
    gaps: list[str],
    pairs: int,
    seed: int,
    fdr: float,
    ledger: str | None = None,
    keys: tuple[str, ...] = (),
) -> ProbeEntry:
    """This probe's entry of summary.json's "probes": its number (the ledger's, `ledger.Ledger.spend`), when,
    which gaps, pairs, seed, the share of fdr it spends, and the ledger and keys that numbered it."""
    at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return ProbeEntry(probe=number, at=at, gaps=tuple(gaps), pairs=pairs, seed=seed, fdr=fdr, share=share(number),
                      ledger=ledger, keys=keys)  # fmt: skip


def fdr_text(earlier: Earlier, fdr: float) -> str:
    """A warning when an earlier probe of the run spent shares of another --fdr ('' otherwise): the bound is
    then Σ share(k) · fdr_k, not one fdr."""
    others = sorted({p.fdr for p in earlier.probes if p.fdr is not None} - {fdr})
    if not others:
        return ""
    return (
        f"note: earlier probes of this run used --fdr {', '.join(f'{f:g}' for f in others)}; the run's "
        f"false-discovery bound is the sum of each probe's share of its own fdr (keep one --fdr for a run)"
    )


def standing(rows: Iterable[ProbeResult]) -> dict[str, tuple[str, int]]:
    """gap id -> (its standing verdict, the probe that gave it): the first probe that confirmed it, else its
    latest probe."""
    out: dict[str, tuple[str, int]] = {}
    for r in sorted(rows, key=probe_of):
        held = out.get(r.gap_id)
        if held is None or held[0] != "confirmed":
            out[r.gap_id] = (r.verdict, probe_of(r))
    return out


def replanned(frame: pd.DataFrame, dropped: int, effect: float | None, planned: float | None, fdr: float,
              probe: int, family: int) -> NextPlan | None:  # fmt: skip
    """The next-probe plan of an unsettled gap whose latest attempt's answered pairs are `frame` (`dropped`
    more were dropped by the checks), for the run's next probe `probe` in a family of `family` gaps, for the
    effect that attempt `planned` for (else the run's); None when those pairs cannot be tested."""
    tested = gap_test(frame, fdr)  # only its SE and discordance are used: the interval's level does not matter
    if tested is None:
        return None
    if planned is not None and effect and planned != effect:  # the attempt deflated the run's effect: again
        ratio = effect / planned
        return plan_next(tested, frame, dropped, effect, Inflation(math.nan, ratio, planned), fdr, probe, family)
    return plan_next(tested, frame, dropped, effect, None, fdr, probe, family)


def replanned_rows(earlier: Earlier, probing: set[str], next_probe: int, fdr: float) -> list[ProbeResult]:
    """The earlier rows, each unsettled gap this probe does not name planned again for the run's next probe:
    its latest attempt's pairs_needed, pairs_to_write and note, in a family as large as that attempt's probe
    (its verdict, p and q stay as judged)."""
    held = standing(earlier.results)
    pairs = answered_pairs(earlier.items)
    family = {p.probe: len(p.gaps) for p in earlier.probes}
    rows = []
    for r in earlier.results:
        verdict, probe = held[r.gap_id]
        if verdict == "unsettled" and probe_of(r) == probe and r.gap_id not in probing:
            mine = pairs[(pairs["gap_id"] == r.gap_id) & (pairs["probe"] == probe)]
            size = family.get(probe) or sum(probe_of(o) == probe for o in earlier.results)
            plan = replanned(pd.DataFrame(mine[list(PAIR_COLUMNS)]), r.n_dropped or 0, r.run_effect,
                             r.planned_effect, fdr, next_probe, max(size, 1))  # fmt: skip
            if plan is not None:
                r = dataclasses.replace(r, pairs_needed=plan.needed, pairs_to_write=plan.write, note=plan.note,
                                        planned_effect=plan.effect)  # fmt: skip
        rows.append(r)
    return rows


def merged_results(new: pa.Table, entry: ProbeEntry, carried: list[ProbeResult]) -> pa.Table:
    """This probe's rows (numbered as `entry`) then every earlier attempt, ranked in that order, each with its
    gap's standing verdict, in PROBE_RESULTS_SCHEMA (a column all null in this probe keeps its type)."""
    mine = [probe_result(r) for r in new.to_pylist()]
    numbered = [dataclasses.replace(r, probe=entry.probe, probe_seed=entry.seed, probed_at=entry.at) for r in mine]
    rows = numbered + list(carried)
    held = standing(rows)
    ranked = [dataclasses.replace(r, rank=rank, standing=held[r.gap_id][0]) for rank, r in enumerate(rows, start=1)]
    return pa.Table.from_pylist([r.row() for r in ranked], schema=PROBE_RESULTS_SCHEMA)


def merged_items(new: pa.Table, number: int, earlier: Earlier) -> pa.Table:
    """This probe's items (numbered, their pair ids by `numbered_id`) then every earlier attempt's."""
    pairs, gaps = new["pair_id"].to_pylist(), new["gap_id"].to_pylist()
    ids = [numbered_id(p, g, number) for p, g in zip(pairs, gaps, strict=True)]
    mine = new.set_column(new.schema.get_field_index("pair_id"), "pair_id", pa.array(ids, pa.string()))
    mine = mine.append_column("probe", pa.array([number] * new.num_rows, pa.int64()))
    if earlier.items is None or earlier.items.num_rows == 0:
        return mine
    return pa.concat_tables([mine, earlier.items.select(mine.schema.names).cast(mine.schema)])
