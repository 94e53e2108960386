"""What the loop needs of torch.distributed: joining the process group that torchrun set up,
numbers the ranks agree on, and a SIGINT that stops every rank at the same step."""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NoReturn

import torch
import torch.distributed as dist
from torch import nn

_stop_requested = threading.Event()  # a rank's SIGINT, once defer_interrupts() is in place
_left = threading.Event()  # this process joined a process group and left it
_in_loop = threading.Event()  # a loop is between its first and last step, reading the flag
_launched: list[Callable[[], None]] = []  # how to stop the ranks this process waits on (launching)


def rank_device(device: torch.device) -> torch.device:
    """The device this process trains on: under torchrun, where the config says `cuda` with no
    index, the GPU of its local rank (a node's ranks one GPU each, as launch.ranks_for counts
    them); otherwise `device` itself."""
    if (device.type == "cuda" and device.index is None and "LOCAL_RANK" in os.environ
            and int(os.environ.get("WORLD_SIZE", "1")) > 1):
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return device


def setup(device: torch.device) -> tuple[int, int]:
    """(rank, world size): (0, 1) outside torchrun; under it, the process group joined (gloo on
    CPU, nccl on CUDA, `device` the rank's own: rank_device)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    if device.type == "cuda":
        torch.cuda.set_device(device)  # nccl's collectives run on the current device
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size()


def leave() -> None:
    """Leave the process group a rank joined, before the interpreter exits. Even so its
    teardown could abort (see run_program), which the process then skips."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        _left.set()


def run_program(main: Callable[[], Any]) -> NoReturn:
    """Run a command line's `main` as this process's program and exit with its status.

    A rank that left a gloo process group ends with os._exit once the exit handlers have run:
    the interpreter's teardown after it aborted now and then ("terminate called without an
    active exception", no Python frame left; 9 of 30 two-rank DDP runs under load, torch 2.13:
    experiments/2026-12-06-gloo-exit-abort), failing a finished run. Every other process exits
    as usual."""
    try:
        main()
        code: Any = 0
    except SystemExit as stop:
        code = stop.code
    exit_program(code)


def exit_program(code: Any) -> NoReturn:
    """sys.exit(code), but through os._exit in a rank that left its group (run_program)."""
    if not _left.is_set():
        sys.exit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)  # what sys.exit does with a message
        code = 1
    atexit._run_exitfuncs()  # what the interpreter's exit runs first, and os._exit would skip
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def agree(values: list[float], world: int, device: torch.device) -> list[float]:
    """The mean of each number over the ranks (the numbers themselves without DDP), in one
    collective; NaN anywhere gives NaN."""
    if world <= 1:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)  # nccl needs a CUDA tensor
    dist.all_reduce(t)
    return (t / world).tolist()


def gather_texts(text: str, world: int) -> list[str]:
    """Every rank's `text`, in rank order (just [text] without DDP)."""
    if world <= 1:
        return [text]
    texts: list[Any] = [None] * world
    dist.all_gather_object(texts, text)
    return texts


def barrier(world: int) -> None:
    if world > 1:
        dist.barrier()


def defer_interrupts() -> None:
    """In a rank: SIGINT or SIGTERM sets a flag the loop reads (`stop_requested`) instead of
    raising.

    The ranks agree on the flag after each step and stop at the same one. A KeyboardInterrupt
    raised mid-step stopped one rank while another waited in a collective, which then aborted
    ("terminate called without an active exception") into torchrun's failure report."""
    if threading.current_thread() is threading.main_thread():  # signal's rule
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: _stop_requested.set())


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def terminate_as_interrupt() -> Callable[[], None] | None:
    """In one process: SIGTERM raises KeyboardInterrupt, so the loop saves its checkpoint and
    reports the interrupt as for Ctrl-C (a scheduler's SIGTERM otherwise ended the process with
    no checkpoint). Returns what puts the default back; None where the process already handles
    SIGTERM its own way (flowbench turns it into KeyboardInterrupt itself, with its own exit
    status) or off the main thread, where Python allows no handler."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        return None
    signal.signal(signal.SIGTERM, _interrupt)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_requested() -> bool:
    return _stop_requested.is_set()


def request_stop() -> bool:
    """Ask the running loop to save its checkpoint at the end of its step and stop (raising
    TrainingInterrupted), as a rank's SIGINT does: the way to stop it from a signal handler,
    where a save mid-step would store half-updated state. In a launcher waiting on the ranks
    it started (`launching`), the ranks are asked instead: each saves at its step's end and
    exits. False when no loop is running (no step to end: the flag is left unset)."""
    if _launched:
        _launched[-1]()
        return True
    if not _in_loop.is_set():
        return False
    _stop_requested.set()
    return True


@contextmanager
def launching(stop_ranks: Callable[[], None]) -> Iterator[None]:
    """While inside, this process waits on ranks it started (flowcaps.launch): request_stop
    calls `stop_ranks` (a SIGINT to each rank, which defer_interrupts turns into a stop at the
    step's end), so a scheduler's signal to this process reaches the training."""
    _launched.append(stop_ranks)
    try:
        yield
    finally:
        _launched.remove(stop_ranks)


def mark_loop(running: bool) -> None:
    """The loop says when its steps begin and end: request_stop reaches it only in between."""
    (_in_loop.set if running else _in_loop.clear)()


def clear_stop() -> None:
    """Forget a stop request (one a loop has acted on, or one that came after it ended)."""
    _stop_requested.clear()


def match_compiled_grad_layout(model: nn.Module) -> None:
    """Give a 4-D weight whose two memory formats coincide (a 1x1 conv) channels-last strides.

    Its bytes are the same either way, but DDP compares a gradient's strides with the weight's
    literally, and the compiled backward returns such a gradient with channels-last strides.
    """
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 4 and p.is_contiguous() and p.is_contiguous(
                    memory_format=torch.channels_last):
                p.set_(torch.empty_like(p, memory_format=torch.channels_last).copy_(p))
