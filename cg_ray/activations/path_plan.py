"""`packing: auto`: the reader's batching path chosen from recorded kernel rates per device kind, weighed
by this job's own lengths.

Three paths read the same s̃ (tests check them equal within 1e-5 in float32): padded batches, packed
batches with attention as an SDPA call per row ("packed-sdpa"), and packed batches with one FlexAttention
call per layer ("packed-flex"). A path's recorded figure is its **kernel rate**: token slots run per
second, padding included (padded: rows × longest; flex: the static packed length). What a job gets from
it depends on the job (issue #41): with the job's rows planned before reading,

    padded      real tokens/s = rate × (1 − padding share of its longest-first padded batches)
    packed-*    real tokens/s = rate × fill of its packed batches ÷ (1 − shared-prefix share)

(fill: real packed tokens / slots, 1 for the SDPA loop; shared-prefix share: the tokens a packed read
skips because rows share a prefix). A packed path displaces padded only when predicted ≥ MARGIN faster
(the recorded rates carry a few per cent of noise, and the flex path compiles where eager padded does
not), so a sorted uniform suite stays padded on CUDA and a skewed or shared-prefix one packs. Without
the job's rows (before the first read) the kernel rates alone decide. A path without a figure is taken
only when no usable path has one. Built-in figures below; `reader_paths.json` in the cg_ray cache
(written by `record_rate`, e.g. from bench_gpu.py `--record`) replaces them per machine and path.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace
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


MARGIN = 1.03

_H100 = "H100 bf16, Llama-3.1-8B to layer 19 + 65k ReLU SAE, 4,096 random rows of 128-512 tokens, eager"
_H200 = "H200 bf16, Llama-3.1-8B to layer 19 + 65k ReLU SAE, eager (issue #41)"
_CPU = "2-core AVX2 EPYC float32, SmolLM2-135M to layer 20, 64 GSM8K rows, 2026-11-24 (docs/reader.md)"
# Kernel rates (slots/s). CUDA: issue #41's H200 run of bench_gpu.py: padded 46,994 real tokens/s on the
# uniform suite at 5.4% padding (43,496 on the skewed one at 11.9%: the same 49.4-49.7k slots/s);
# packed-flex 47,788 on the skewed suite, lengths bucketed (so ≥ 47,788 slots/s; its uniform figure
# included compiles); packed-sdpa issue #33's H100 figure (no padding, no shared prefixes), 0.57× padded
# there. To be replaced by a GPU session's `bench_gpu.py --record` with the kernel of issue #41.
# CPU: docs/reader.md's quiet re-run: padded 854 real tokens/s at 1.3% padding, packed without shared
# prefixes 903 (with them, the default, 1,127).
BUILTIN: dict[str, dict[str, PathRate]] = {
    "cuda": {
        "padded": PathRate(49_676.0, f"{_H200}, uniform suite: 46,994 tokens/s at 5.4% padding"),
        "packed-flex": PathRate(47_788.0, f"{_H200}, skewed suite, bucketed lengths (a lower bound)"),
        "packed-sdpa": PathRate(22_174.0, f"{_H100} (issue #33)"),
    },
    "cpu": {
        "padded": PathRate(865.0, f"{_CPU}: 854 tokens/s at 1.3% padding"),
        "packed-sdpa": PathRate(903.0, _CPU),
    },
}


@dataclass(frozen=True)
class JobShape:
    """This job's rows as each path would batch them (computed from their token ids before reading)."""

    tokens: int
    padding_share: float  # of the padded batches' slots
    shared_share: float  # of the rows' tokens that a packed read skips (shared prefixes)
    fill: dict[str, float]  # per packed path: real packed tokens / slots run

    def factor(self, path: str) -> float:
        """Real tokens per slot run on `path`."""
        if path == "padded":
            return 1.0 - self.padding_share
        return self.fill.get(path, 1.0) / max(1.0 - self.shared_share, 1e-9)

    def arithmetic(self, path: str, rate: float) -> str:
        if path == "padded":
            return f"{path} {rate:,.0f} × (1 − {self.padding_share:.1%} padding) = {rate * self.factor(path):,.0f}"
        fill = self.fill.get(path, 1.0)
        return (
            f"{path} {rate:,.0f} × {fill:.1%} fill ÷ (1 − {self.shared_share:.1%} shared) = "
            f"{rate * self.factor(path):,.0f}"
        )


class PathDecisionDict(TypedDict):
    path: str
    requested: str
    candidates: dict[str, str | None]
    rates: dict[str, float | None]
    job: dict[str, object] | None
    predicted: dict[str, float] | None
    reason: str


@dataclass(frozen=True)
class PathDecision:
    path: str  # one of PATHS
    requested: str  # the config's packing (and kernel) setting
    candidates: dict[str, str | None]  # path -> None if usable here, else why not
    rates: dict[str, float | None]  # the recorded kernel rate (slots/s) each candidate was judged by
    reason: str
    job: JobShape | None = None  # this job's shares, when weighed
    predicted: dict[str, float] | None = None  # real tokens/s each measured usable path would give

    @property
    def packed(self) -> bool:
        return self.path != "padded"

    @property
    def kernel(self) -> str:
        return self.path.removeprefix("packed-")

    def describe(self) -> PathDecisionDict:
        return cast(PathDecisionDict, asdict(self))

    def fallen_back(self, why: str) -> PathDecision:
        """The same decision, turned to padded batches (the packed path failed while reading)."""
        return replace(self, path="padded", reason=f"{self.reason}; then padded: {why}")


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


def choose(
    requested: str,
    candidates: dict[str, str | None],
    rates: dict[str, PathRate],
    kind: str,
    job: JobShape | None = None,
) -> PathDecision:
    """The usable candidate with the highest predicted real tokens/s (kernel rates alone without `job`);
    a packed path beats padded only by MARGIN; unmeasured paths only when none is measured.
    `candidates`: every path the config allows, None where the model can run it, else why not."""
    usable = [p for p in PREFERENCE if p in candidates and candidates[p] is None]
    judged: dict[str, float | None] = {p: (rates[p].tokens_per_s if p in rates else None) for p in candidates}
    if not usable:  # padded always works; only a config that forbids it gets here
        raise ValueError(f"no reader path usable for packing={requested}: {candidates}")
    measured = [p for p in usable if p in rates]
    predicted = {p: rates[p].tokens_per_s * (job.factor(p) if job else 1.0) for p in measured}

    def score(p: str) -> tuple[float, int]:
        return (predicted[p] / (MARGIN if p != "padded" and "padded" in predicted else 1.0), -PREFERENCE.index(p))

    if len(usable) == 1:
        path, why = usable[0], "the only usable path"
    elif measured:
        path = max(measured, key=score)
        what = "predicted for this job" if job else "fastest recorded"
        why = f"{what} on {kind}: {predicted[path]:,.0f} tokens/s ({rates[path].source})"
    else:
        path, why = usable[0], f"no recorded figures on {kind}: the path doing the least work"
    others = [f"{p} {'not measured' if p not in predicted else f'{predicted[p]:,.0f}'}" for p in usable if p != path]
    unusable = [f"{p}: {candidates[p]}" for p in candidates if candidates[p] is not None]
    reason = f"packing: {requested} -> {path}, {why}" + (f"; vs {', '.join(others)}" if others else "")
    if job is not None and len(measured) > 1:
        sums = "; ".join(job.arithmetic(p, rates[p].tokens_per_s) for p in measured)
        reason += f"; this job ({job.tokens:,} tokens): {sums} (packed must be {MARGIN:.2f}× padded)"
    reason += f"; not usable: {'; '.join(unusable)}" if unusable else ""
    return PathDecision(path, requested, candidates, judged, reason, job, predicted if job else None)
