"""Torch's compiled-kernel cache, mended after an interrupted compile.

torch.compile builds C++ kernels into a shared cache (TORCHINDUCTOR_CACHE_DIR, by default
/tmp/torchinductor_$USER) and reuses any library file that exists there. A training stopped
while the compiler was writing one (Ctrl-C in the first minute) leaves a short file, and every
later run fails to load it ("file too short"). `compiled` drops such files before it
compiles; inductor holds a lock per kernel while it builds, so a file whose lock is free and
whose ELF headers reach past its end is debris, never work in progress. Kernels built under
one ATEN_CPU_CAPABILITY crash under another, so a set capability gets a folder of its own.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import torch
from filelock import FileLock, Timeout  # torch's own dependency; inductor locks with it

_ELF_MAGIC = b"\x7fELF"


def default_dir() -> Path:
    """The cache folder torch.compile uses in this process."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    return Path(cache_dir())


def is_truncated(path: Path) -> bool:
    """True when `path` cannot be a whole 64- or 32-bit ELF file (its section table lies past
    the end, or the header itself is missing)."""
    with open(path, "rb") as f:
        head = f.read(64)
        size = f.seek(0, 2)
    if len(head) < 52 or head[:4] != _ELF_MAGIC:
        return True
    order = "<" if head[5] == 1 else ">"
    if head[4] == 2:  # 64-bit: e_shoff at 0x28, e_shentsize and e_shnum at 0x3A
        if len(head) < 64:
            return True
        shoff, = struct.unpack_from(order + "Q", head, 0x28)
        shentsize, shnum = struct.unpack_from(order + "HH", head, 0x3A)
    else:  # 32-bit: e_shoff at 0x20, e_shentsize and e_shnum at 0x2E
        shoff, = struct.unpack_from(order + "I", head, 0x20)
        shentsize, shnum = struct.unpack_from(order + "HH", head, 0x2E)
    return shoff + shentsize * shnum > size


def drop_truncated(cache: Path | None = None) -> list[Path]:
    """Delete the truncated kernel libraries and objects in `cache` that no process is
    building now; returns what was deleted."""
    cache = default_dir() if cache is None else Path(cache)
    if not cache.is_dir():
        return []
    dropped = []
    (cache / "locks").mkdir(parents=True, exist_ok=True)
    for path in sorted(cache.glob("*/*.so")) + sorted(cache.glob("*/*.o")):
        if not is_truncated(path):
            continue
        key = path.name.split(".", 1)[0]
        try:
            with FileLock(str(cache / "locks" / f"{key}.lock"), timeout=0):
                if path.exists() and is_truncated(path):
                    path.unlink()
                    dropped.append(path)
        except Timeout:
            continue  # another process is building this kernel now
    return dropped


def split_by_capability() -> Path | None:
    """With ATEN_CPU_CAPABILITY set (torch held to, say, its AVX2 kernels on a CPU with
    AVX-512), point the cache at a folder of that capability's own, inside torch's default one,
    and return it; None where it is not set or the cache folder is the user's choice.

    Inductor's cache keys leave the capability out: a kernel built under one and loaded under
    the other gave negative sampling weights and a segfault in the backward on the Intel Xeon."""
    capability = os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    if not capability:
        return None
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    base = Path(default_cache_dir()).absolute()
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current is not None and Path(current).absolute() != base:
        return None  # the user's folder, or this capability's already
    folder = base / f"aten-{capability}"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    return folder


def compiled(fn):
    """torch.compile(fn), with the cache of this process's kernel capability, after dropping
    what an interrupted earlier compile left in it."""
    split_by_capability()
    drop_truncated()
    return torch.compile(fn)
