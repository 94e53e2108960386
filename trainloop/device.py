"""Where a run computes: the device a name asks for, and the CPU settings every method trains
under."""
from __future__ import annotations

import os

import torch

from trainloop.allocator import keep_freed_memory
from trainloop.errors import LoopError


def resolve_device(name: str, error: type[Exception] = LoopError) -> torch.device:
    """"auto" -> cuda when there is one, else cpu; `error` (the caller's kind) for a device that
    is absent or unknown."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise error(f"unknown device {name!r}; choose cpu, cuda, cuda:N or auto") from None
    if device.type not in ("cpu", "cuda"):
        raise error(f"device {name!r} is not supported; choose cpu, cuda, cuda:N or auto")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise error(f"device {name!r} requested but no CUDA device is available")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise error(f"device {name!r} requested but there are {torch.cuda.device_count()} "
                    f"CUDA devices")
    return device


def setup_cpu(threads: int, world: int = 1) -> None:
    """Threads (0: the machine's cores shared among `world` ranks), no denormals, freed memory
    kept for reuse."""
    # One thread per core: on a 2-core machine 2 ranks x 1 thread beat 1 rank x 2 threads.
    torch.set_num_threads(threads or max(1, (os.cpu_count() or 1) // world))
    # Flat-coloured images give tiny gradients; denormal floats are very slow on x86.
    torch.set_flush_denormal(True)
    keep_freed_memory()  # no page faults for each step's activations
