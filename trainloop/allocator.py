"""glibc's allocator told to keep freed memory for reuse instead of handing it back to the kernel,
and asked to hand it back when a long loop has let it pile up.

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
def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc, else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.gnu_get_libc_version  # glibc only: other C libraries' mallopt differ or are absent
    except (OSError, AttributeError, TypeError):
        return None
    return libc


@functools.lru_cache(maxsize=1)
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (once); False where the C library
    is not glibc (musl, macOS, Windows) or refuses, and then nothing changes."""
    libc = _glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, KEEP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP_BYTES))


def release_freed_memory() -> bool:
    """Hand the heap's free pages back to the kernel now (glibc's malloc_trim); False where the
    C library is not glibc. With the thresholds above a loop whose temporaries vary in size
    fragments the never-trimmed heap: scoring the articulated figures' 10k test pairs (16
    capsules, 10 parts) grew to 23 GB resident before the loop trimmed every few batches."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
