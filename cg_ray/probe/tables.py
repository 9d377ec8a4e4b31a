"""The probe's two tables: probe/items.parquet (every item written, with its checks, answer and score, dropped
ones included with why) and probe/results.parquet (one row per gap probed: its verdict on the new items and
what each step kept)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from cg_ray.probe.answer import Answer
from cg_ray.probe.confirm import GapConfirmation
from cg_ray.probe.items import ROLES, ItemPair
from cg_ray.schemas.probe import PROBE_ITEMS_SCHEMA, PROBE_RESULTS_SCHEMA

if TYPE_CHECKING:
    from cg_ray.probe.checked import Checked
    from cg_ray.probe.plan import ProbePlan


def pair_scores(kept: Sequence[ItemPair], answers: dict[str, Answer]) -> tuple[pd.DataFrame, list[str]]:
    """One row per kept pair with both scores (confirm.PAIR_COLUMNS), and the pairs a side of which got no
    answer at all (an unparsable answer scores 0, as the suite's rows do; no answer is not a wrong one)."""
    rows, unanswered = [], []
    for p in kept:
        t, c = answers.get(p.item_id("target")), answers.get(p.item_id("control"))
        if t is None or c is None or t.score is None or c.score is None:
            unanswered.append(p.pair_id)
            continue
        rows.append({"gap_id": p.gap_id, "pair_id": p.pair_id, "request_id": p.request_id,
                     "target_score": t.score, "control_score": c.score})  # fmt: skip
    columns = ["gap_id", "pair_id", "request_id", "target_score", "control_score"]
    return pd.DataFrame(rows, columns=columns), unanswered


def items_table(checked: Checked, answers: dict[str, Answer]) -> pa.Table:
    records: list[dict[str, Any]] = []
    for p in checked.pairs:
        verdict = checked.reader.get(p.pair_id)
        for role in ROLES:
            a = answers.get(p.item_id(role))
            prompt, reference = p.side(role)
            strength = None if verdict is None else getattr(verdict, f"{role}_strength")
            records.append(
                {
                    "gap_id": p.gap_id,
                    "pair_id": p.pair_id,
                    "role": role,
                    "generator": p.generator,
                    "request_id": p.request_id,
                    "seed": p.seed,
                    "prompt": prompt,
                    "reference": reference,
                    "scorer": p.scorer,
                    "reader_strength": None if strength is None else min(strength, 1e9),
                    "near_copy": checked.near.get(p.pair_id),
                    "dropped": checked.dropped.get(p.pair_id),
                    "response": None if a is None else a.response,
                    "score": None if a is None else a.score,
                    "score_status": None if a is None else a.status,
                }
            )
    return pa.Table.from_pylist(records, schema=PROBE_ITEMS_SCHEMA)


def results_table(plan: ProbePlan, checked: Checked, verdicts: Sequence[GapConfirmation]) -> pa.Table:
    """One row per gap: what the run said of it, what each step kept, and its verdict on the new items (its
    probe's number and the standing verdicts are the history's to fill: `history.merged_results`)."""
    by_id = {v.gap_id: v for v in verdicts}
    records = []
    for rank, gap in enumerate(plan.gaps, start=1):
        outcome = checked.written.get(gap.gap_id)
        mine = [p for p in checked.pairs if p.gap_id == gap.gap_id]
        read = [checked.reader[p.pair_id] for p in mine if p.pair_id in checked.reader]
        reasons = [checked.dropped.get(p.pair_id) for p in mine]
        records.append(
            {
                "rank": rank,
                "gap_id": gap.gap_id,
                "kind": gap.kind,
                "description": gap.description,
                "concept_ids": list(gap.concept_ids),
                "run_confirmed": gap.confirmed,
                "run_rows": gap.n_rows,
                "generator": checked.generator.get(gap.gap_id, ""),
                "requests": 0 if outcome is None else outcome.requests,
                "writer_requests_replaced": 0 if outcome is None else outcome.writer_requests,
                "malformed": 0 if outcome is None else outcome.malformed,
                "wrong_reference": 0 if outcome is None else outcome.wrong_reference,
                "pairs_written": len(mine),
                "near_copies": reasons.count("near_copy"),
                "reader_checked": len(read),
                "reader_passed": sum(v.passed for v in read),
                "reader_pass_rate": (sum(v.passed for v in read) / len(read)) if read else None,
                "writer_note": "" if outcome is None else outcome.note,
                **{k: v for k, v in asdict(by_id[gap.gap_id]).items() if k != "gap_id"},
            }
        )
    return pa.Table.from_pylist(records, schema=PROBE_RESULTS_SCHEMA)
