"""glibc's allocator told to keep freed memory for reuse instead of handing it back to the kernel.

By default glibc serves large blocks with fresh mmap pages and returns freed heap tops, so a
training step's activations are faulted in anew on every step (the measurement is in
`docs/deviations.md`, "Allocator thresholds"). The arithmetic is untouched; only where freed
memory goes changes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

# mallopt parameters from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
KEEP_BYTES = 1 << 30  # blocks under 1 GiB come from the reusable heap, and it is never trimmed


@functools.lru_cache(maxsize=1)
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (once); False where the C library
    is not glibc (musl, macOS, Windows) or refuses, and then nothing changes."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # glibc only: other C libraries' mallopt differ or are absent
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, KEEP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP_BYTES))
