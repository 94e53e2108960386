"""One writer per run folder: a second training into the same folder (another shell, a job
resubmitted while the first still runs) is refused instead of overwriting the first's
checkpoint and interleaving its log.

An advisory `flock` on `run.lock` in the folder, held for the training's life; the kernel
drops it when the process ends, however it ends, so a killed run leaves no stale lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

from trainloop.errors import LoopError

LOCK_NAME = "run.lock"


@contextlib.contextmanager
def hold(out: Path) -> Iterator[None]:
    """Hold the run folder `out` (made if missing) for this process, or a LoopError naming the
    process that holds it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise LoopError(f"run folder {out} is in use by another training (pid {holder}); "
                            f"wait for it to end, or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
