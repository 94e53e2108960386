"""Stage 1 from the best of several short starts (`TrainConfig.starts`; not PSD's, which trains
one run): each start trains `start_fraction` of the step budget from its own seed, on the run's
own schedule (the KL warm-up follows the whole budget's steps), and the run goes on from the
start whose training flow loss is lowest. Unsupervised: only the training loss chooses.

The starts live in `out/starts/<i>/` (resumable like any run); the chosen one's checkpoint,
given the run's config, becomes `out/checkpoint.pt` and its log `out/log.csv`, so the run then
resumes from it as from an interruption. Its progress records every start's seed and score.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import shutil
from pathlib import Path
from typing import Any, Callable

import torch

import trainloop
from baselines.psd import checkpoint
from baselines.psd.config import TrainConfig
from baselines.psd.errors import PsdError

SEED_STRIDE = 1000  # start i trains from seed + i * SEED_STRIDE; start 0 is the run's own seed


def start_seed(seed: int, i: int) -> int:
    return seed + i * SEED_STRIDE


def start_score(log_path: Path) -> float:
    """The mean training flow loss over the last quarter of a start's log rows."""
    with open(log_path, newline="") as f:
        flows = [float(row["flow"]) for row in csv.DictReader(f) if row.get("flow")]
    if not flows:
        raise PsdError(f"{log_path} has no flow-loss rows: a start too short to score "
                       f"(raise start_fraction or the budget)")
    tail = flows[-max(1, len(flows) // 4):]
    return sum(tail) / len(tail)


def start_loop(cfg: TrainConfig, i: int) -> trainloop.LoopConfig:
    """Start i's loop: its own folder and seed, `start_fraction` of the run's steps. The run's
    time guard, if any, guards each start whole: a guard stops a run, it never sizes one."""
    loop = cfg.loop
    return dataclasses.replace(loop, out=str(Path(loop.out) / "starts" / str(i)),
                               seed=start_seed(loop.seed, i),
                               steps=max(1, math.ceil(loop.steps * cfg.start_fraction)))


def begin_with_best_start(cfg: TrainConfig, make_task: Callable[..., trainloop.Task],
                          data: tuple[torch.Tensor, ...], *, progress: bool,
                          meta: dict[str, Any] | None) -> None:
    """Train the starts not yet finished, then put the best one in place as the run's
    checkpoint. `make_task(start_only=True)` builds a start's task."""
    out = Path(cfg.loop.out)
    scores = []
    for i in range(cfg.starts):
        loop = start_loop(cfg, i)
        folder = Path(loop.out)
        if not (folder / trainloop.MODEL_NAME).exists():  # unfinished: train (or resume) it
            trainloop.fit(make_task(start_only=True), loop, data, progress=progress, meta=meta)
        scores.append(start_score(folder / trainloop.LOG_NAME))
    best = min(range(cfg.starts), key=lambda i: (scores[i], i))
    folder = out / "starts" / str(best)
    blob = checkpoint.read(folder / trainloop.CKPT_NAME)
    blob["config"] = cfg.to_json()  # the run's own (seed and budget included)
    progress_state = {**trainloop.checkpoint.progress_of(blob), "start": best,
                      "starts": [{"seed": start_seed(cfg.loop.seed, i), "flow": round(s, 5)}
                                 for i, s in enumerate(scores)]}
    blob["progress"] = json.dumps(progress_state, sort_keys=True)
    shutil.copyfile(folder / trainloop.LOG_NAME, out / trainloop.LOG_NAME)
    # last: a run interrupted before it starts over here
    trainloop.checkpoint.save_blob(out / trainloop.CKPT_NAME, blob)
