"""`compile: auto`: compile the reader only when the job's tokens pay for the compilation on this device.

Compiling costs a fixed time C once and then runs `speedup` times faster than eager. With T tokens to read
at an eager rate r (measured on the job's first batch), compiling saves T/r · (1 − 1/speedup) seconds; we
compile when that exceeds C. C and speedup are per device kind, recorded from measurements: the built-in
figures below, replaced by the figures of the last compiled run on this machine when one was recorded
(`record_compile`, a small JSON file in the cg_ray cache).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompileCost:
    compile_s: float  # one-off compilation time
    speedup: float  # compiled / eager throughput afterwards
    source: str  # where the figures come from


# CUDA: issue #33's H100 run of bench_gpu.py (bf16, padded batches, 4,096 random rows): Llama-3.1-8B to
# layer 19, 38,861 -> 52,730 tokens/s (1.36x) after 131 s of compilation; Gemma-2-2B to layer 20 gained
# more (60-82k -> 129k, 77 s), so the Llama figures are the cautious ones. CPU: measured (docs/reader.md,
# "Issue #26"): the first compiled batch took 60 s (cold inductor cache, one graph for every batch size),
# then 934 vs 908 tokens/s eager, interleaved on the same 64 GSM8K rows (load average ~2): matmuls are ~78%
# of eager time on this CPU and already at its matmul peak, so fusing the rest gains little; `auto`
# compiles only past ~2,000 s of eager reading.
BUILTIN: dict[str, CompileCost] = {
    "cuda": CompileCost(
        compile_s=131.0, speedup=1.36, source="H100 bf16, Llama-3.1-8B to layer 19, padded (bench_gpu.py, issue #33)"
    ),
    "cpu": CompileCost(
        compile_s=60.0, speedup=1.03, source="2-core AVX2 EPYC, SmolLM2-135M to layer 20, packed, 2026-11-24"
    ),
}


class CompileCostDict(TypedDict):
    compile_s: float
    speedup: float
    source: str


class CompileDecisionDict(TypedDict):
    """`CompileDecision.describe()`, as the reader's description records it."""

    compile: bool
    planned_tokens: int
    eager_tokens_per_s: float | None
    cost: CompileCostDict | None
    reason: str


@dataclass(frozen=True)
class CompileDecision:
    compile: bool
    planned_tokens: int
    eager_tokens_per_s: float | None
    cost: CompileCost | None
    reason: str

    def describe(self) -> CompileDecisionDict:
        out = asdict(self)
        out["cost"] = None if self.cost is None else asdict(self.cost)
        return cast(CompileDecisionDict, out)  # asdict of this dataclass (and of its cost): exactly its fields


def device_kind(device: torch.device | str) -> str:
    return "cuda" if str(device).startswith("cuda") else "cpu"


def decide(planned_tokens: int, eager_tokens_per_s: float, cost: CompileCost) -> CompileDecision:
    """Compile iff the eager seconds saved on the planned tokens exceed the compilation time."""
    if eager_tokens_per_s <= 0 or cost.speedup <= 1.0:
        return CompileDecision(False, planned_tokens, eager_tokens_per_s, cost, "compiling would not be faster")
    eager_s = planned_tokens / eager_tokens_per_s
    saved = eager_s * (1.0 - 1.0 / cost.speedup)
    verdict = saved > cost.compile_s
    reason = (
        f"{planned_tokens} tokens at {eager_tokens_per_s:.0f} tokens/s eager = {eager_s:.1f} s; compiling "
        f"({cost.compile_s:.0f} s, {cost.speedup:.2f}x) would save {saved:.1f} s: "
        + ("compile" if verdict else "stay eager")
    )
    return CompileDecision(verdict, planned_tokens, eager_tokens_per_s, cost, reason)


def fixed(value: bool) -> CompileDecision:
    return CompileDecision(value, 0, None, None, f"compile: {str(value).lower()} in the reader config")


def record_file(name: str) -> Path:
    """A file of this machine's measured figures, in the cg_ray cache ($CG_RAY_CACHE, else ~/.cache/cg_ray)."""
    root = os.environ.get("CG_RAY_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "cg_ray") / name


def keep_record(path: Path, key: str, figures: dict[str, object], what: str) -> None:
    """Set `key` of the JSON record file `path` to `figures` (read, update, write back). A record is an
    optimisation, never a reason to fail a run: a file that cannot be read or written is logged and left."""
    try:
        records = json.loads(path.read_text()) if path.is_file() else {}
        records[key] = figures
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(records, indent=1, sort_keys=True))
    except (OSError, ValueError) as exc:
        log.warning("could not record the %s in %s: %s", what, path, exc)


def _record_path() -> Path:
    return record_file("compile_costs.json")


def recorded_cost(kind: str, machine: str, path: Path | None = None) -> CompileCost:
    """The last recorded figures for this machine and device kind, else the built-in ones."""
    path = path or _record_path()
    try:
        records = json.loads(path.read_text())
        entry = records[f"{kind}|{machine}"]
        return CompileCost(float(entry["compile_s"]), float(entry["speedup"]), str(entry["source"]))
    except (OSError, KeyError, TypeError, ValueError):
        return BUILTIN[kind]


def record_compile(kind: str, machine: str, cost: CompileCost, path: Path | None = None) -> None:
    """Keep the figures of a compiled run for this machine's next `compile: auto` decisions."""
    keep_record(path or _record_path(), f"{kind}|{machine}", asdict(cost), "compile cost")
