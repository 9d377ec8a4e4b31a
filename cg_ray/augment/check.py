"""The checks of written items, in order, each dropping what fails it with its reason (kept in items.parquet):

- **format** and **wrong_reference**: decided as the items were written (`writer.py`);
- **near_copy**: of a row of the run (the benchmark's own among them) or of an earlier item, by the probe's
  n-gram containment (`probe.dedupe.near_copies`): a copy is neither new data nor a second observation;
- **reader**: the reader reads each remaining item and the targeted concept must fire on it, at the firing
  threshold scope used (`probe.reader_check.strength` ≥ 1). With the check off, every item is still read:
  its concepts are what the coverage counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cg_ray.activations.protocol import Reader
from cg_ray.augment.plan import AugmentPlan
from cg_ray.augment.writer import Item
from cg_ray.probe.dedupe import near_copies
from cg_ray.probe.reader_check import strength

REASONS = ("format", "wrong_reference", "near_copy", "reader")


@dataclass(frozen=True)
class Read:
    """One item's s̃ as the reader gave it (sparse)."""

    concept_ids: npt.NDArray[np.int64]
    concept_acts: npt.NDArray[np.float64]


@dataclass
class Checked:
    items: list[Item] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # item id -> reason
    near: dict[str, str] = field(default_factory=dict)  # item id -> what it copies
    strength: dict[str, float] = field(default_factory=dict)  # item id -> its concept's s̃ / firing threshold
    read: dict[str, Read] = field(default_factory=dict)

    def kept(self) -> list[Item]:
        return [i for i in self.items if i.item_id not in self.dropped]

    def counts(self, concept: int) -> dict[str, int]:
        mine = [i for i in self.items if i.concept_id == concept]
        out = {r: sum(self.dropped.get(i.item_id) == r for i in mine) for r in REASONS}
        return {"written": len(mine), **out, "kept": len(mine) - sum(out.values())}


def check_items(items: Sequence[Item], plan: AugmentPlan, suite: Sequence[str], reader: Reader) -> Checked:
    out = Checked(items=list(items))
    for i in items:
        if i.format_error is not None:
            out.dropped[i.item_id] = "format"
        elif i.reference_ok is False:
            out.dropped[i.item_id] = "wrong_reference"
    todo = out.kept()
    copies = near_copies([i.text for i in todo], suite, threshold=plan.config.near_copy)
    for i, copy in zip(todo, copies, strict=True):
        if copy is not None:
            what = f"run row {copy.index}" if copy.source == "suite" else f"item {todo[copy.index].item_id}"
            out.near[i.item_id] = f"{what} ({copy.overlap:.0%} of its 5-grams)"
            out.dropped[i.item_id] = "near_copy"
    todo = out.kept()
    rules = {t.concept_id: {t.concept_id: t.firing_threshold} for t in plan.targets}
    for i, r in zip(todo, reader.read([i.text for i in todo]) if todo else [], strict=True):
        ids, acts = np.asarray(r.concept_ids, dtype=np.int64), np.asarray(r.concept_acts, dtype=np.float64)
        out.read[i.item_id] = Read(ids, acts)
        out.strength[i.item_id] = strength(ids, acts, rules[i.concept_id])
        if plan.config.reader_check and out.strength[i.item_id] < 1.0:
            out.dropped[i.item_id] = "reader"
    return out
