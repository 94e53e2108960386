"""One training as several CPU processes: `flowcaps.train` starts torchrun itself.

On a CPU, N single-threaded DDP ranks train faster than one N-threaded process (numbers in
docs/flowcaps.md), so the quick profile asks for one rank per core (TrainConfig.cpu_ranks = 0).
`batch_size` stays the global batch: each rank takes batch_size // N.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from flowcaps.config import TrainConfig
from flowcaps.errors import FlowcapsError

LAUNCH_CONFIG = "launch_config.json"  # the per-rank config the ranks read, in the run folder


def ranks_for(cfg: TrainConfig, device_type: str) -> int:
    """How many processes to start: 1 inside torchrun already, on a GPU, or when asked."""
    if device_type != "cpu" or cfg.cpu_ranks == 1 or "WORLD_SIZE" in os.environ:
        return 1
    wanted = cfg.cpu_ranks or (os.cpu_count() or 1)
    return max(1, min(wanted, cfg.batch_size))


def per_rank_config(cfg: TrainConfig, ranks: int) -> TrainConfig:
    return cfg.replace(batch_size=cfg.batch_size // ranks, cpu_ranks=1, threads=1)


def launch(cfg: TrainConfig, data: str | Path, ranks: int, progress: bool) -> Path:
    """Run `flowcaps train` under torchrun with `ranks` CPU processes; returns the model path."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = out / LAUNCH_CONFIG
    tmp = spec.with_suffix(".tmp")
    tmp.write_text(per_rank_config(cfg, ranks).to_json())
    tmp.replace(spec)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={ranks}", "-m", "flowcaps.cli", "train", str(data),
           "--config", str(spec)] + ([] if progress else ["--quiet"])
    # OMP_NUM_THREADS silences torchrun's notice; each rank sets its own threads anyway.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode
    if code != 0:
        raise FlowcapsError(f"training with {ranks} CPU processes (torchrun) failed with exit "
                            f"status {code}; its error is printed above")
    return out / "model.pt"
