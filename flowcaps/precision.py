"""What a machine's CPU offers for bf16, for the records and the compute bench to report.

A run's precision is its config's `bf16` (False in every profile): an opt-in written into the
config, never chosen from the flags read here, so one config computes the same arithmetic on
every machine.
"""
from __future__ import annotations

import functools
from pathlib import Path

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
