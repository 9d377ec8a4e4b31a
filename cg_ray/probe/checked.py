"""What the writing and checking steps of a probe kept and dropped: the record the run fills and the tables
read (its own module, so that tables.py need not import the run)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cg_ray.probe.items import GenerationOutcome, ItemPair
from cg_ray.probe.reader_check import ReaderVerdict


@dataclass
class Checked:
    """Every pair written, and why each one that will not be answered was dropped."""

    pairs: list[ItemPair] = field(default_factory=list)
    written: dict[str, GenerationOutcome] = field(default_factory=dict)
    generator: dict[str, str] = field(default_factory=dict)  # gap id -> who wrote it
    dropped: dict[str, str] = field(default_factory=dict)  # pair id -> reason
    near: dict[str, str] = field(default_factory=dict)  # pair id -> what it copies
    reader: dict[str, ReaderVerdict] = field(default_factory=dict)

    def kept(self) -> list[ItemPair]:
        return [p for p in self.pairs if p.pair_id not in self.dropped]
