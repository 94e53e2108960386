"""One training as several processes: `flowcaps.train` starts torchrun itself.

On a CPU, N single-threaded DDP ranks train faster than one N-threaded process (numbers in
docs/results/flowcaps.md, "Two CPU ranks"), so the quick profile asks for one rank per core (TrainConfig.cpu_ranks = 0).
Over several nodes (trainloop.rendezvous) each node starts its torchrun agent with the same
command: its CPU ranks, or one rank per GPU. On CUDA a node always starts one rank per visible
GPU, each on the GPU of its local rank (trainloop.ddp.rank_device). `batch_size` stays the global
batch: each of the W ranks of all nodes takes batch_size // W.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from flowcaps import checkpoint
from flowcaps.config import TrainConfig
from flowcaps.errors import FlowcapsError, TrainingInterrupted
from trainloop import ddp, lock
from trainloop.errors import LoopError
from trainloop.rendezvous import Rendezvous

LAUNCH_CONFIG = "launch_config.json"  # the per-rank config the ranks read, in the run folder
# A rank's one-line error (bad data, a diverged loss, a full disk) goes to this file in the run
# folder, named to the ranks by ERROR_ENV, instead of to the terminal: the parent prints it once,
# and drops what follows it (the other ranks' broken collectives, torchrun's failure report).
RANK_ERROR, ERROR_ENV = "rank_error.txt", "FLOWCAPS_RANK_ERROR"
# torchrun's and the ranks' standard error, whole, in the run folder (one file per node over
# several nodes); kept where torchrun failed, removed once it ends well.
TORCHRUN_LOG = "torchrun.log"
# Where the terminal's copy of that output stops: a traceback (a rank's, prefixed "[rankN]: ",
# or torchrun's own) or an error record of torchrun's logger ("E1208 00:08:37.456000 ...").
FAILURE_START = re.compile(rb"(?m)^(\[rank\d+\]: )?Traceback \(most recent call last\)|^E\d{4} ")
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends


def ranks_for(cfg: TrainConfig, device: str | torch.device,
              rdzv: Rendezvous = Rendezvous()) -> int:
    """How many processes to start on this node: 1 inside torchrun already; on CUDA one per
    visible GPU (CUDA_VISIBLE_DEVICES, a Slurm job's GPUs), or 1 where the device names one
    (`cuda:1`); on a CPU `cpu_ranks`. Never more than the global batch has pairs."""
    if "WORLD_SIZE" in os.environ:
        return 1
    device = torch.device(device)
    if device.type == "cuda":
        wanted = 1 if device.index is not None else torch.cuda.device_count()
    elif cfg.cpu_ranks == 1:
        return 1
    else:
        wanted = cfg.cpu_ranks or (os.cpu_count() or 1)
    return max(1, min(wanted, cfg.loop.batch_size))


def per_rank_config(cfg: TrainConfig, ranks: int) -> TrainConfig:
    return cfg.replace(loop={"batch_size": cfg.loop.batch_size // ranks, "threads": 1}, cpu_ranks=1)


def launch(cfg: TrainConfig, data: str | Path, ranks: int, progress: bool,
           rdzv: Rendezvous = Rendezvous()) -> Path:
    """Run `flowcaps train` under torchrun with `ranks` processes on this node (and as many on
    each of the others); returns the model path. On one node this process holds the run folder
    (trainloop.lock) for the ranks; the nodes of a multi-node run share theirs unlocked."""
    out = Path(cfg.loop.out)
    if rdzv.multi_node:
        return _launch(cfg, data, ranks, progress, rdzv)
    try:
        with lock.hold(out):
            return _launch(cfg, data, ranks, progress, rdzv)
    except LoopError as err:  # the folder is another training's (the launch raises no LoopError)
        raise FlowcapsError(str(err)) from None


def _die_with_parent() -> None:
    """In torchrun's process, before it starts: SIGTERM when this launcher dies, however it dies
    (a kill -9 left torchrun and its ranks training on, orphaned). torchrun hands the SIGTERM
    to the ranks, which save their checkpoint and stop (trainloop.ddp.defer_interrupts)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _launch(cfg: TrainConfig, data: str | Path, ranks: int, progress: bool,
            rdzv: Rendezvous) -> Path:
    out = Path(cfg.loop.out)
    out.mkdir(parents=True, exist_ok=True)
    # Each node's ranks read their own launcher's file, so nodes started with different settings
    # train no one's config but stop with an error (trainloop checks that the ranks agree).
    node = f"{socket.gethostname()}-{os.getpid()}"
    spec = out / (LAUNCH_CONFIG if not rdzv.multi_node else f"launch_config.{node}.json")
    tmp = spec.with_name(f"{spec.name}.{node}.tmp")
    tmp.write_text(per_rank_config(cfg, ranks * rdzv.nnodes).to_json())
    tmp.replace(spec)
    log = out / (TORCHRUN_LOG if not rdzv.multi_node else f"torchrun.{node}.log")
    try:
        return _run_torchrun(cfg, data, ranks, progress, rdzv, spec, log)
    finally:
        if rdzv.multi_node:
            spec.unlink(missing_ok=True)


def _run_torchrun(cfg: TrainConfig, data: str | Path, ranks: int, progress: bool,
                  rdzv: Rendezvous, spec: Path, log: Path) -> Path:
    out = Path(cfg.loop.out)
    cmd = [sys.executable, "-m", "torch.distributed.run", *rdzv.torchrun_args(ranks),
           "-m", "flowcaps.cli", "train", str(data),
           "--config", str(spec)] + ([] if progress else ["--quiet"])
    # A node's ranks report to their own launcher: over several nodes, one file per node.
    error_file = out / (RANK_ERROR if not rdzv.multi_node else f"rank_error.{spec.stem}.txt")
    error_file.unlink(missing_ok=True)  # a killed run's
    env = torchrun_env(error_file)
    # torchrun runs in its own session, so a Ctrl-C (or SIGTERM) reaches this process alone,
    # which hands each rank one SIGINT: the ranks save their checkpoint and exit 0, and torchrun
    # with them, quietly (SIGINT to torchrun itself ends in its traceback). Left to the terminal's
    # signal, or killed with this process, ranks were orphaned and kept training.
    started = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True,
                            preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    relay = threading.Thread(target=_relay, args=(proc.stderr, error_file, log), daemon=True)
    relay.start()
    interrupts = 0
    # SIGTERM raises as Ctrl-C does, unless the process handles it already (flowbench's own
    # stop, a submitit job's, which asks through ddp.request_stop below)
    own_term = (threading.current_thread() is threading.main_thread()  # signal's rule
                and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if own_term else None
    try:
        with ddp.launching(lambda: _signal_ranks(proc, signal.SIGINT)):
            while True:
                try:
                    code = proc.wait()
                    break
                except KeyboardInterrupt:
                    interrupts += 1
                    if interrupts == 1:
                        _signal_ranks(proc, signal.SIGINT)
                    else:  # a second Ctrl-C: stop now, the last periodic checkpoint kept
                        _signal_ranks(proc, signal.SIGKILL)
                        proc.kill()
    finally:
        if own_term:
            signal.signal(signal.SIGTERM, previous)
        relay.join(timeout=10)
    if code == 0:
        log.unlink(missing_ok=True)  # a run that ended well, finished or interrupted
    elif error_file.is_file():
        message = error_file.read_text().strip()
        error_file.unlink(missing_ok=True)
        raise FlowcapsError(message)
    model, ckpt = out / "model.pt", out / "checkpoint.pt"
    # A Ctrl-C after the last step leaves a finished run; ranks stopped by a SIGINT of their own
    # (not through this process) also exit 0, unfinished.
    finished = code == 0 and model.exists() and model.stat().st_mtime >= started
    if not finished and (interrupts or code == 0):
        raise TrainingInterrupted(ckpt, _saved_step(ckpt))
    if code != 0:
        output = log.read_text(errors="replace") if log.is_file() else ""
        where = f" on each of {rdzv.nnodes} nodes" if rdzv.multi_node else ""
        line = rdzv.lost_nodes(output, _saved_step(ckpt)) or (
            f"training with {ranks} process(es){where} (torchrun) failed with exit status {code}")
        raise FlowcapsError(f"{line}; the output of torchrun and its ranks is in {log}")
    return model


def torchrun_env(error_file: Path) -> dict[str, str]:
    """The environment torchrun and its ranks run in. OMP_NUM_THREADS silences torchrun's notice
    (each rank sets its own threads anyway). The three log levels keep the warnings of a stopping
    run out of its one-line message, its errors still shown: LOGLEVEL torchrun's agent ("Sending
    process ... closing signal"); TORCH_LOGS the rendezvous ("failed to shutdown the rendezvous")
    and TORCH_CPP_LOG_LEVEL the c10d store ("recvVector failed ... Connection reset by peer"), both
    printed by the node left behind when the node hosting the rendezvous stops first. A user's own
    settings of the three win."""
    quiet = {"LOGLEVEL": "ERROR", "TORCH_LOGS": "-distributed", "TORCH_CPP_LOG_LEVEL": "ERROR"}
    # a rank killed by a signal (an abort in a C++ thread) prints where each of its threads was
    crash = {"PYTHONFAULTHANDLER": "1"}
    return {**quiet, **crash, **os.environ, "OMP_NUM_THREADS": "1",
            ERROR_ENV: str(error_file.absolute())}


def report_to_parent(message: str) -> bool:
    """In a rank started by `launch`: leave the one-line error for the parent (the first rank's
    wins) and return True; False outside such a rank (the caller prints it)."""
    path = os.environ.get(ERROR_ENV)
    if not path:
        return False
    try:
        with open(path, "x") as fh:
            fh.write(message + "\n")
    except FileExistsError:
        pass  # another rank's (the same loss, agreed by all, or the first failure)
    return True


def _relay(stream, error_file: Path, log: Path) -> None:
    """The ranks' and torchrun's standard error, as it comes: all of it to `log`; to ours (the
    progress bar, warnings) until a rank has reported an error or a traceback begins, since
    what follows is the failure's echo, which the launcher sums up in one line."""
    out = getattr(sys.stderr, "buffer", None)
    echo, tail = True, b""
    with open(log, "wb") as kept:
        for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):
            kept.write(chunk)
            kept.flush()
            # a marker cut in two by the pipe is found in the last chunk's tail and this one
            found = FAILURE_START.search(tail + chunk)
            shown = chunk if found is None else chunk[:max(0, found.start() - len(tail))]
            tail = chunk[-64:]
            if not echo or error_file.exists():
                continue  # read on, so no rank blocks on a full pipe
            echo = found is None
            if out is not None:
                out.write(shown)
                out.flush()
            else:
                sys.stderr.write(shown.decode(errors="replace"))
                sys.stderr.flush()
    stream.close()


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the ranks as Ctrl-C does, checkpoint saved


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`, found in /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")"
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue  # a process that ended while being read
    return found


def _signal_ranks(proc: subprocess.Popen, sig: int) -> None:
    """`sig` to torchrun's children (the ranks); to torchrun where there is none."""
    ranks = children(proc.pid)
    for pid in ranks:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    if not ranks and proc.poll() is None:
        proc.send_signal(sig)


def _saved_step(ckpt: Path) -> int | None:
    """The step a run checkpoint was saved at; None where there is none to read."""
    try:
        return json.loads(checkpoint.read(ckpt)["progress"])["step"]
    except (FlowcapsError, KeyError, ValueError):
        return None
