"""Stopping a long command on Ctrl-C or SIGTERM: the exit statuses and the handler that turns a
signal into a flag, shared by `geogen make`, `flowcaps train` and `flowbench`."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

INTERRUPTED = 130      # the shell's status for a run stopped by Ctrl-C (128 + SIGINT)
TERMINATED = 143       # and by SIGTERM (128 + SIGTERM)


def exit_status(received: list[int]) -> tuple[str, int]:
    """What to call the stop and its exit status, from the signals `signals_stop` saw first."""
    if received[:1] == [signal.SIGTERM]:
        return "terminated", TERMINATED
    return "interrupted", INTERRUPTED


@contextmanager
def signals_stop(stop: threading.Event, received: list[int]) -> Iterator[None]:
    """While inside, Ctrl-C and SIGTERM set `stop` (`make_dataset` then stops between two work
    units) and are appended to `received`; a second one raises KeyboardInterrupt at once.
    Python's own Ctrl-C, raised wherever it lands, could cut an HDF5 write (its .tmp left) or
    fall in a weakref callback that swallows it (the run went on); SIGTERM's default killed
    the parent alone (the workers' BrokenPipe tracebacks, the .tmp left)."""
    def handler(signum, frame):
        received.append(signum)
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
    with _handlers(handler):
        yield


@contextmanager
def signals_raise(received: list[int]) -> Iterator[None]:
    """While inside, Ctrl-C and SIGTERM raise KeyboardInterrupt where they land (Python's rule
    for Ctrl-C, which a training loop catches to save its checkpoint) and are appended to
    `received`, so a caller can tell a stop from an error that it caused."""
    def handler(signum, frame):
        received.append(signum)
        raise KeyboardInterrupt
    with _handlers(handler):
        yield


@contextmanager
def _handlers(handler) -> Iterator[None]:
    """`handler` for SIGINT and SIGTERM while inside; the previous ones restored after."""
    if threading.current_thread() is not threading.main_thread():  # signal's rule
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
