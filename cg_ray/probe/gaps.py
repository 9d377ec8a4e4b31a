"""The gaps of a run that a probe can test: its failure modes (failure_modes.parquet) and weak concepts
(weaknesses.parquet), each read into a `Gap` with the words, example prompts and scorer a generator needs.

Ids are stable within a run: `mode:RANK` (the rank the run printed) and `concept:ID`. By default a probe
takes the run's first gaps in the order it reports them, failure modes before concepts: confirmed ones
first, then the unconfirmed candidates, which the probe exists to settle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.errors import CgRayError
from cg_ray.metrics.firing import firing_threshold
from cg_ray.probe.items import Gap
from cg_ray.probe.selection import run_inflation

EXAMPLES = 5  # example prompts handed to a generator per gap
DEFAULT_SCORER = "exact"


class GapError(CgRayError):
    """A gap that the run does not have, or a run a probe cannot read."""


@dataclass(frozen=True)
class RunGaps:
    """Every gap of a run in the run's order, and the firing rule of each (for the reader check)."""

    gaps: list[Gap]
    thresholds: dict[str, dict[int, float]]  # gap id -> concept -> the activation that counts as firing

    def select(self, wanted: Sequence[str] | None, top: int) -> list[Gap]:
        """The gaps named in `wanted` (in that order), or the run's first `top`; an unknown id is an error
        that lists the ids the run has."""
        if not wanted:
            return self.gaps[:top]
        by_id = {g.gap_id: g for g in self.gaps}
        unknown = [w for w in wanted if w not in by_id]
        if unknown:
            have = ", ".join(g.gap_id for g in self.gaps[:12]) or "none"
            raise GapError(
                f"unknown gap {', '.join(map(repr, unknown))}: this run has {have}"
                + (" …" if len(self.gaps) > 12 else "")
            )
        return [by_id[w] for w in dict.fromkeys(wanted)]


def run_scorers(run: RunDir) -> dict[str, str]:
    """benchmark -> scorer, as the run's manifest recorded them (a run made by `cg-ray metrics` has none)."""
    counts = (run.read_json_if_present(S.MANIFEST_FILE) or {}).get("counts") or {}
    return {b: c.get("scorer", DEFAULT_SCORER) for b, c in (counts.get("scoring") or {}).items()}


def _rows_of(run: RunDir, ids: set[str]) -> dict[str, dict[str, Any]]:
    if not ids:
        return {}
    table = pq.read_table(run.rows, columns=["row_id", "benchmark", "prompt", "score"])
    table = table.filter(pc.is_in(table["row_id"], value_set=pa.array(sorted(ids))))
    return {r["row_id"]: r for r in table.to_pylist()}


def concept_thresholds(path: Path, concepts: set[int]) -> dict[int, float]:
    """Each concept's firing threshold over the run's rows, as the failure modes' rule has it
    (`metrics.firing.firing_threshold`: weak SAE tails do not count), in one streaming pass over rows.parquet's
    concept columns: for a run written before weaknesses.parquet recorded `firing_threshold` (format 3)."""
    found: dict[int, list[np.ndarray]] = {c: [] for c in concepts}
    wanted = pa.array(sorted(concepts), type=pa.int64())
    columns = ["concept_ids", "concept_acts"]
    for batch in pq.ParquetFile(RunDir(path).rows).iter_batches(columns=columns, batch_size=65_536):
        ids = pc.list_flatten(batch.column(0)).cast(pa.int64())
        mask = pc.is_in(ids, value_set=wanted)
        ids_np = ids.filter(mask).to_numpy()
        acts_np = pc.list_flatten(batch.column(1)).filter(mask).to_numpy()
        for c in np.unique(ids_np):
            found[int(c)].append(acts_np[ids_np == c])
    return {c: firing_threshold(np.concatenate(parts) if parts else np.zeros(0)) for c, parts in found.items()}


# The run's effect a probe plans for and refutes against is its held-out one only (cg_ray.schemas): a failure
# mode's and a weak concept's `heldout_residual` (measured on rows that did not choose it; `in_sample_residual`
# is measured on the rows that chose or ranked it). Selection inflates an in-sample effect, which would make
# "refuted" easier and plan too few pairs, so a gap without a held-out effect gets None and the verdict uses
# confirm.DEFAULT_EFFECT, saying so.
MODE_EFFECT = "heldout_residual"
CONCEPT_EFFECT = "heldout_residual"


def _effect(entry: dict[str, Any], name: str) -> float | None:
    value = entry.get(name)
    return None if value is None else float(value)


def read_gaps(path: Path) -> RunGaps:
    """The gaps of the run directory `path`, in the run's order (failure modes, then weak concepts)."""
    run = RunDir(path)
    if not run.has(S.ROWS_FILE):
        raise GapError(
            f"{path}: no {S.ROWS_FILE}; a probe needs a run directory made by `cg-ray run` or `cg-ray metrics`"
        )
    if pc.count(pq.read_table(run.rows, columns=["score"])["score"]).as_py() == 0:
        raise GapError(f"{run.rows}: no row has a score; a probe tests a model's gaps, which need scores")
    modes = _table(run, S.FAILURE_MODES_FILE)
    weak = _table(run, S.WEAKNESSES_FILE)
    rows = _rows_of(run, {i for e in (*modes, *weak) for i in (e.get("example_row_ids") or [])[:EXAMPLES]})
    scorers = run_scorers(run)
    gaps: list[Gap] = []
    thresholds: dict[str, dict[int, float]] = {}
    for m in modes:
        gap_id = f"mode:{m['rank']}"
        members = [int(c) for c in m["concept_ids"]]
        gaps.append(_gap(gap_id, "mode", members, m, rows, scorers, _effect(m, MODE_EFFECT)))
        limits = m.get("firing_thresholds") or [0.0] * len(members)
        thresholds[gap_id] = dict(zip(members, map(float, limits), strict=True))
    unrecorded = {int(w["concept_id"]) for w in weak if w.get("firing_threshold") is None}
    # A run before format 3 recorded no concept's threshold: computed over its rows the same way, once.
    computed = concept_thresholds(path, unrecorded) if unrecorded else {}
    for w in weak:
        gap_id = f"concept:{w['concept_id']}"
        if any(g.gap_id == gap_id for g in gaps):
            continue
        effect = _effect(w, CONCEPT_EFFECT)
        c = int(w["concept_id"])
        gaps.append(_gap(gap_id, "concept", [c], w, rows, scorers, effect))
        recorded = w.get("firing_threshold")
        thresholds[gap_id] = {c: float(recorded) if recorded is not None else computed[c]}
    if not gaps:
        raise GapError(f"{path}: the run lists no failure modes and no weak concepts to probe")
    return RunGaps(gaps, thresholds)


def _table(run: RunDir, name: str) -> list[dict[str, Any]]:
    table = run.read_table(name)  # an older run's columns under the new names
    return [] if table is None else sorted(table.to_pylist(), key=lambda e: e["rank"])


def _gap(
    gap_id: str,
    kind: Any,
    members: list[int],
    entry: dict[str, Any],
    rows: dict[str, dict[str, Any]],
    scorers: dict[str, str],
    effect: float | None,
) -> Gap:
    examples = [rows[i] for i in (entry.get("example_row_ids") or [])[:EXAMPLES] if i in rows]
    benchmarks = Counter(r["benchmark"] for r in examples)
    benchmark = benchmarks.most_common(1)[0][0] if benchmarks else ""
    # The items are scored by that benchmark's scorer, so the writer sees only its rows: an example of another
    # benchmark (a letter choice beside a number) would invite items whose answers the scorer cannot read.
    examples = [r for r in examples if r["benchmark"] == benchmark]
    name = MODE_EFFECT if kind == "mode" else CONCEPT_EFFECT
    return Gap(
        gap_id=gap_id,
        kind=kind,
        concept_ids=tuple(members),
        description=str(entry.get("description") or entry.get("label") or gap_id),
        terms=tuple(entry.get("terms") or ()),
        examples=tuple(r["prompt"] for r in examples),
        benchmark=benchmark,
        scorer=scorers.get(benchmark, DEFAULT_SCORER),
        effect=effect,
        confirmed=bool(entry.get("confirmed")),
        n_rows=int(entry.get("n_rows") or 0),
        inflation=run_inflation(effect, _effect(entry, f"{name}_low"), _effect(entry, f"{name}_high"),
                                _effect(entry, "mde"), bool(entry.get("confirmed"))),
    )  # fmt: skip
