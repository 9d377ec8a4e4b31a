"""What this machine computes fast: CPU capability, native bfloat16, GPU name; `dtype: auto` resolved from it.

bfloat16 is the fast path on GPUs that support it and on CPUs with native bf16 instructions (AVX512_BF16,
AMX), but 4–8× *slower* than float32 on CPUs without them (measured on an AVX2-only AMD EPYC: the reader
ran at 72 tokens/s in bf16 against 606 in float32). So no dtype is hard-wired: `auto` asks the hardware.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict, cast

if TYPE_CHECKING:
    import torch

Dtype = Literal["float32", "bfloat16", "float16"]
DtypeChoice = Literal["auto", "float32", "bfloat16", "float16"]

# /proc/cpuinfo flags (x86) / Features (aarch64) that mean bf16 matrix work runs natively.
_NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16", "sve_bf16"})
# torch.backends.cpu.get_cpu_capability() values that imply native bf16 (newer torch reports these).
_NATIVE_BF16_CAPABILITIES = frozenset({"AVX512_BF16", "AMX", "AMX_BF16"})


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none, e.g. macOS)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_capability() -> str:
    """torch's name for the vector ISA its CPU kernels use here (e.g. "AVX2", "AVX512")."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def cpu_has_native_bf16(flags: frozenset[str] | None = None, capability: str | None = None) -> bool:
    flags = cpu_flags() if flags is None else flags
    capability = cpu_capability() if capability is None else capability
    return bool(flags & _NATIVE_BF16_FLAGS) or capability.upper() in _NATIVE_BF16_CAPABILITIES


def resolve_dtype(requested: str, device: torch.device | str = "cpu") -> Dtype:
    """`auto` → bfloat16 on a CUDA device that supports it (else float16), bfloat16 on a CPU with native
    bf16, float32 on any other CPU. An explicit dtype is returned as it is."""
    if requested != "auto":
        if requested not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be auto, float32, bfloat16 or float16, got {requested!r}")
        return requested  # type: ignore[return-value]
    if str(device).startswith("cuda"):
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "bfloat16" if cpu_has_native_bf16() else "float32"


class HardwareDict(TypedDict):
    """`HardwareInfo.as_dict()`, as manifests record it."""

    cpu_model: str
    cpu_capability: str
    native_bf16: bool
    cores: int
    gpu: str | None


@dataclass(frozen=True)
class HardwareInfo:
    cpu_model: str
    cpu_capability: str
    native_bf16: bool
    cores: int
    gpu: str | None

    def as_dict(self) -> HardwareDict:
        return cast(HardwareDict, asdict(self))  # asdict of this dataclass: exactly its fields

    def line(self) -> str:
        """One line for benchmark output and logs."""
        bf16 = "native bf16" if self.native_bf16 else "no native bf16"
        cpu = f"CPU {self.cpu_model} ({self.cpu_capability}, {bf16}, {self.cores} cores)"
        return f"{cpu}; GPU {self.gpu}" if self.gpu else f"{cpu}; no GPU"


def hardware_info() -> HardwareInfo:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return HardwareInfo(
        cpu_model=cpu_model(),
        cpu_capability=cpu_capability(),
        native_bf16=cpu_has_native_bf16(),
        cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
        gpu=gpu,
    )
