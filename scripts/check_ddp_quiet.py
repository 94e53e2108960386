"""Check that a compiled 2-rank CPU training (the quick profile's setup) prints no warnings.

Two gloo ranks train the quick profile's model, shrunk to 32 px, for a few steps with
torch.compile, and their output is searched for the warnings the demo once printed (dynamo's
"Profiler record function ... will be ignored", DDP's "Grad strides do not match bucket view
strides"). Exit status 1 if any appears. Takes 20-60 s on 2 cores (compilation).

    PYTHONPATH=. python scripts/check_ddp_quiet.py
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile

WARNINGS = ("will be ignored", "Grad strides do not match", "Warning")


def _rank(rank: int, world: int, port: int, out: str) -> None:
    import numpy as np
    import torch.distributed as dist

    from flowcaps import trainer
    from flowcaps.profiles import quick as quick_profile

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
                      RANK=str(rank))
    cfg = quick_profile(out).replace(
        model={"image_size": 32, "enc_channels": [8, 8, 16, 16], "enc_hidden": 32},
        batch_size=8, epochs=1, threads=1, cpu_ranks=1, device="cpu", max_minutes=None,
        warmup_steps=1)
    pairs = np.random.default_rng(rank).integers(0, 256, (32, 2, 32, 32, 3), dtype=np.uint8)
    try:
        trainer.run(cfg, pairs, progress=False)
    finally:
        dist.destroy_process_group()


def main() -> int:
    if len(sys.argv) == 2 and sys.argv[1] == "--ranks":
        import torch.multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with tempfile.TemporaryDirectory() as out:
            mp.spawn(_rank, args=(2, port, out), nprocs=2, join=True)
        return 0
    run = subprocess.run([sys.executable, __file__, "--ranks"], capture_output=True, text=True)
    output = run.stdout + run.stderr
    found = [w for w in WARNINGS if w in output]
    if run.returncode != 0 or found:
        print(output, file=sys.stderr)
        print(f"FAILED: exit status {run.returncode}, found {found}", file=sys.stderr)
        return 1
    print("OK: two compiled ranks trained without warnings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
