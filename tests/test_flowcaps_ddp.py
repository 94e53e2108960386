"""Two CPU ranks (gloo) train a few steps under DDP and end with identical weights."""
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from flowcaps import trainer

from test_flowcaps_train import tiny_config, tiny_pairs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
                      RANK=str(rank))
    try:
        # A time guard shorter than one step: the ranks must agree to stop at the same step
        # (each measures its own clock), or one would wait forever in the next all-reduce.
        cfg = tiny_config(out, epochs=1, threads=1, max_minutes=1e-5)
        try:
            trainer.run(cfg, tiny_pairs(32, seed=rank), progress=False)
        except trainer.FlowcapsError as err:
            Path(out, f"rank{rank}.stop").write_text(str(err))
        # Resumed without the guard, both ranks train on to the budget's end.
        model, _ = trainer.run(cfg.replace(max_minutes=None), tiny_pairs(32, seed=rank),
                               progress=False)
        torch.save(model.state_dict(), os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_end_with_identical_weights(tmp_path):
    world = 2
    for attempt in range(3):
        # The port is free when picked but released before rank 0 binds it, so another
        # process can take it in between: then pick another.
        try:
            mp.spawn(_worker, args=(world, _free_port(), str(tmp_path)), nprocs=world, join=True)
            break
        except mp.ProcessRaisedException as err:
            if "address already in use" not in str(err).lower() or attempt == 2:
                raise
    w0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    w1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
    # The ranks saw different pairs (seeded by rank) yet moved away from the common start.
    torch.manual_seed(0)
    start = trainer.FlowCapsules(tiny_config(tmp_path).model).state_dict()
    assert any(not torch.allclose(start[k], w0[k]) for k in w0)
    # Only rank 0 writes the run's files.
    assert (tmp_path / "model.pt").exists() and (tmp_path / "checkpoint.pt").exists()
    for rank in range(world):  # each rank stopped at step 1 and said so
        assert "time guard" in (tmp_path / f"rank{rank}.stop").read_text()
        assert "at step 1 of 2" in (tmp_path / f"rank{rank}.stop").read_text()
    meta = trainer.checkpoint.meta_of(trainer.checkpoint.read(tmp_path / "model.pt"))
    assert meta["world_size"] == 2 and meta["stop_reason"] == "epochs"
    assert meta["step"] == 2 and meta["pairs"] == 32  # two steps of 8 pairs on each rank


def test_train_starts_its_own_ranks_and_splits_the_batch(tiny_geo, tmp_path):
    """cpu_ranks=2: `flowcaps.train` runs torchrun itself, each rank on half the global batch."""
    import flowcaps
    from flowcaps import checkpoint, launch

    cfg = tiny_config(tmp_path / "run", epochs=1, batch_size=8, cpu_ranks=2)
    path = flowcaps.train(cfg, tiny_geo, progress=False)
    meta = checkpoint.meta_of(checkpoint.read(path))
    assert meta["world_size"] == 2
    assert meta["step"] == 48 // 2 // 4  # 24 pairs per rank, 4 per rank per step
    ranked = checkpoint.config_of(checkpoint.read(path))
    assert ranked.loop.batch_size == 4 and ranked == launch.per_rank_config(cfg, 2)


def _processes_naming(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().decode(errors="replace"):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def _ranks_of(run: Path) -> list[int]:
    """The rank processes training into `run` (torchrun names the same config but is not one)."""
    return [pid for pid in _processes_naming(str(run / "launch_config.json"))
            if "torch.distributed.run" not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")]


@pytest.mark.parametrize("presses", [1, 2, "one rank"])
def test_ctrl_c_stops_the_ranks_saves_and_says_how_to_resume(tiny_geo, tmp_path, presses):
    """A Ctrl-C (SIGINT to the command's process group) while its torchrun ranks train: the
    ranks save and exit (a second Ctrl-C kills them), none keeps training, and the output ends
    in one line, no traceback. A SIGINT to one rank alone stops them all at one step: had that
    rank stopped by itself, the other would have aborted in a collective."""
    run = tmp_path / "run"
    spec = tmp_path / "config.json"
    spec.write_text(tiny_config(run, epochs=100_000, cpu_ranks=2).to_json())
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowcaps.cli", "train", str(tiny_geo), "--config", str(spec),
         "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own group, as a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # CI may ignore SIGINT
    try:
        deadline = time.monotonic() + 120
        while not ((run / "log.csv").exists() and len((run / "log.csv").read_text().splitlines()) > 3):
            assert proc.poll() is None and time.monotonic() < deadline, "training did not start"
            time.sleep(0.2)
        if presses == "one rank":
            os.kill(max(_ranks_of(run)), signal.SIGINT)
        else:
            for _ in range(presses):
                os.killpg(proc.pid, signal.SIGINT)
                time.sleep(0.05)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert re.fullmatch(r"Error: interrupted at step \d+; resume with the same command "
                        r"\(checkpoint .*checkpoint\.pt\)", err.strip()), err
    assert (run / "checkpoint.pt").exists()
    time.sleep(1)
    assert _processes_naming(str(run)) == []  # no rank left training
