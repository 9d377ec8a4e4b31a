"""`packing: auto`: the reader's batching path chosen from recorded throughput per device kind.

Three paths read the same s̃ (tests check them equal within 1e-5 in float32): padded batches, packed
batches with attention as an SDPA call per row ("packed-sdpa"), and packed batches with one FlexAttention
call per layer ("packed-flex"). Which is fastest depends on the device: on a 2-core CPU the packed SDPA
loop beat padding, on an H100 it ran 1.75× slower. `auto` takes the fastest path with a recorded figure
for this device kind among those the model supports; a path without a figure is taken only when no
supported path has one, so an unmeasured kernel never displaces a measured faster one. Built-in figures
below; `reader_paths.json` in the cg_ray cache (written by `record_rate`, e.g. from bench_gpu.py
`--record`) replaces them per machine and path.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypedDict, cast

from cg_ray.activations.compile_plan import keep_record, record_file

log = logging.getLogger(__name__)

PATHS = ("padded", "packed-sdpa", "packed-flex")
# Ties and the no-figure case: the path that does the least work first.
PREFERENCE = ("packed-flex", "packed-sdpa", "padded")


@dataclass(frozen=True)
class PathRate:
    tokens_per_s: float
    source: str


_H100 = "H100 bf16, Llama-3.1-8B to layer 19 + 65k ReLU SAE, 4,096 random rows of 128-512 tokens, eager"
_CPU = "2-core AVX2 EPYC float32, SmolLM2-135M to layer 20, 64 GSM8K rows, 2026-11-24 (docs/reader.md)"
# Issue #33's H100 run of bench_gpu.py; docs/reader.md's quiet CPU re-run (packed without shared prefixes:
# 903; with them, the default, 1,127).
# No figure yet for packed-flex: it is chosen only once measured faster (bench_gpu.py --record).
BUILTIN: dict[str, dict[str, PathRate]] = {
    "cuda": {"padded": PathRate(38_861.0, _H100), "packed-sdpa": PathRate(22_174.0, _H100)},
    "cpu": {"padded": PathRate(854.0, _CPU), "packed-sdpa": PathRate(903.0, _CPU)},
}


class PathDecisionDict(TypedDict):
    path: str
    requested: str
    candidates: dict[str, str | None]
    rates: dict[str, float | None]
    reason: str


@dataclass(frozen=True)
class PathDecision:
    path: str  # one of PATHS
    requested: str  # the config's packing (and kernel) setting
    candidates: dict[str, str | None]  # path -> None if usable here, else why not
    rates: dict[str, float | None]  # the recorded tokens/s each candidate was judged by
    reason: str

    @property
    def packed(self) -> bool:
        return self.path != "padded"

    @property
    def kernel(self) -> str:
        return self.path.removeprefix("packed-")

    def describe(self) -> PathDecisionDict:
        return cast(PathDecisionDict, asdict(self))


def _record_path() -> Path:
    return record_file("reader_paths.json")


def recorded_rates(kind: str, machine: str, path: Path | None = None) -> dict[str, PathRate]:
    """The built-in figures for this device kind, each replaced by this machine's recorded one if any."""
    rates = dict(BUILTIN.get(kind, {}))
    try:
        records = json.loads((path or _record_path()).read_text())
        for name in PATHS:
            entry = records.get(f"{kind}|{machine}|{name}")
            if entry is not None:
                rates[name] = PathRate(float(entry["tokens_per_s"]), str(entry["source"]))
    except (OSError, AttributeError, KeyError, TypeError, ValueError):
        pass  # no record (or an unreadable one): the built-in figures
    return rates


def record_rate(kind: str, machine: str, name: str, rate: PathRate, path: Path | None = None) -> None:
    """Keep a measured path rate for this machine's next `packing: auto` decisions."""
    if name not in PATHS:
        raise ValueError(f"unknown reader path {name!r} ({', '.join(PATHS)})")
    keep_record(path or _record_path(), f"{kind}|{machine}|{name}", asdict(rate), "reader path rate")


def choose(requested: str, candidates: dict[str, str | None], rates: dict[str, PathRate], kind: str) -> PathDecision:
    """The fastest usable candidate by recorded tokens/s; unmeasured ones only when none is measured.
    `candidates`: every path the config allows, None where the model can run it, else why not."""
    usable = [p for p in PREFERENCE if p in candidates and candidates[p] is None]
    judged: dict[str, float | None] = {p: (rates[p].tokens_per_s if p in rates else None) for p in candidates}
    if not usable:  # padded always works; only a config that forbids it gets here
        raise ValueError(f"no reader path usable for packing={requested}: {candidates}")
    measured = [p for p in usable if p in rates]
    if len(usable) == 1:
        path, why = usable[0], "the only usable path"
    elif measured:
        path = max(measured, key=lambda p: (rates[p].tokens_per_s, -PREFERENCE.index(p)))
        why = f"fastest recorded on {kind}: {rates[path].tokens_per_s:,.0f} tokens/s ({rates[path].source})"
    else:
        path, why = usable[0], f"no recorded figures on {kind}: the path doing the least work"
    others = [f"{p} {'not measured' if judged[p] is None else f'{judged[p]:,.0f}'}" for p in usable if p != path]
    unusable = [f"{p}: {candidates[p]}" for p in candidates if candidates[p] is not None]
    reason = f"packing: {requested} -> {path}, {why}" + (f"; vs {', '.join(others)}" if others else "")
    reason += f"; not usable: {'; '.join(unusable)}" if unusable else ""
    return PathDecision(path, requested, candidates, judged, reason)
