"""The allocator thresholds: a freed block is reused without new page faults, and handed back
on request."""
import platform
import subprocess
import sys

import pytest

# Allocates, frees and allocates again 64 MiB in a fresh process and prints the page faults of
# the second allocation: glibc serves a block this large with fresh mmap pages unless told not to.
PROBE = """
import resource, sys
from trainloop.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = bytearray(1 << 26); del block
before = faults(); block = bytearray(1 << 26); del block
print(faults() - before)
"""


def second_allocation_faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True)
    return int(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_kept_memory_is_reused_without_page_faults():
    pages = (1 << 26) // 4096
    assert second_allocation_faults("default") > pages // 2  # fresh pages every time
    assert second_allocation_faults("keep") < pages // 20  # the freed heap block again


# With the thresholds raised, a freed 256 MiB block at the heap's top stays resident until the
# heap is trimmed; prints the resident MiB after the free, then after release_freed_memory().
TRIM_PROBE = """
from trainloop.allocator import keep_freed_memory, release_freed_memory
assert keep_freed_memory()
resident = lambda: int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20
block = bytearray(1 << 28); del block
kept = resident()
assert release_freed_memory()
print(kept, resident())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc_trim only")
def test_release_hands_the_kept_heap_back():
    out = subprocess.run([sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True,
                         check=True)
    kept, released = map(int, out.stdout.split())
    assert kept - released > 200  # MiB: the freed block's pages left the process
