"""Whether a run computes its network in bf16: TrainConfig.bf16 True, False or "auto".

"auto" turns bf16 autocast on only where the hardware computes bf16 natively: a CPU whose flags
name avx512_bf16 or amx_bf16 and whose kernels torch may run at that level, or a CUDA device
that supports it. Elsewhere autocast emulates bf16 and runs slower than float32, so the flags
are read rather than assumed. `ATEN_CPU_CAPABILITY=avx2` or `ONEDNN_MAX_CPU_ISA=AVX2` (the
stand-in for a CPU without AVX-512) keep the flags but take the bf16 instructions away, so they
count as a CPU without them.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import torch

NATIVE_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# oneDNN's ISA names below its first with bf16 instructions (AVX512_CORE_BF16, AVX2_VNNI_2);
# a limit to one of these leaves its convolutions and matmuls without native bf16.
ONEDNN_ISAS_WITHOUT_BF16 = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE",
                                      "AVX512_CORE_VNNI"})


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


def kernels_allow_bf16(capability: str, onednn_isa: str | None) -> bool:
    """Whether torch's CPU kernels may use the bf16 instructions: ATen's `capability`
    (torch.backends.cpu.get_cpu_capability(), "AVX2" under ATEN_CPU_CAPABILITY=avx2) at AVX-512,
    and oneDNN not limited (ONEDNN_MAX_CPU_ISA, or its older name DNNL_MAX_CPU_ISA) below bf16."""
    if not capability.upper().startswith(("AVX512", "AMX")):
        return False
    return (onednn_isa or "").strip().upper() not in ONEDNN_ISAS_WITHOUT_BF16


def cpu_computes_bf16() -> bool:
    """The CPU has bf16 instructions and this process's torch may use them."""
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA"))
    return cpu_has_native_bf16() and kernels_allow_bf16(torch.backends.cpu.get_cpu_capability(), isa)


def resolve_bf16(setting: bool | str, device: torch.device) -> bool:
    """The bf16 autocast a run uses on `device` for the config value `setting`."""
    if setting != "auto":
        return bool(setting)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_computes_bf16()
