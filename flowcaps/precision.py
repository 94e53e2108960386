"""Whether a run computes its network in bf16: TrainConfig.bf16 True, False or "auto".

"auto" turns bf16 autocast on only where the hardware computes bf16 natively: a CPU whose flags
name avx512_bf16 or amx_bf16, or a CUDA device that supports it. Elsewhere autocast emulates
bf16 and runs slower than float32, so the flags are read rather than assumed.
"""
from __future__ import annotations

import functools
from pathlib import Path

import torch

NATIVE_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The first "flags" line of a /proc/cpuinfo text (every core lists the same ones)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True when this CPU's flags name a bf16 instruction set (Linux; False where unknown)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(cpu_flags(text) & NATIVE_CPU_FLAGS)


def resolve_bf16(setting: bool | str, device: torch.device) -> bool:
    """The bf16 autocast a run uses on `device` for the config value `setting`."""
    if setting != "auto":
        return bool(setting)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_native_bf16()
