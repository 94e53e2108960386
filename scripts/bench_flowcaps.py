"""Training speed of flowcaps: pairs/s at 32, 64 and 128 px, and the ablation of each speed lever.

Each row times full training steps (loss, backward, Adam) of the quick profile on synthetic
moving-square pairs (speed does not depend on the content once denormals are flushed), after
warm-up steps, taking the median step time. Levers at 64 px, each switched off alone:
pixel sampling (points=0 evaluates the full grid), the split first decoder layer, and bf16
autocast / torch.compile switched on alone. Writes results/bench/flowcaps.json.

    .venv/bin/python scripts/bench_flowcaps.py [--steps 10] [--no-compile] [--out results/bench/flowcaps.json]
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

import click
import numpy as np
import torch

from benchmark.records import git_state, machine_info
from flowcaps import PROFILES, TrainConfig
from flowcaps.losses import pair_loss
from flowcaps.model import FlowCapsules
from flowcaps.trainer import to_images


def synthetic_pairs(n: int, size: int, seed: int = 0) -> torch.Tensor:
    """Flat squares moving a few pixels on flat backgrounds: (N, 2, H, W, 3) uint8."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, 2, size, size, 3), np.uint8)
    side = size // 4
    for i in range(n):
        out[i] = rng.integers(181, 256, 3)
        x, y = rng.integers(side, size - 2 * side, 2)
        dx, dy = rng.integers(-size // 10, size // 10 + 1, 2)
        col = rng.integers(0, 75, 3)
        out[i, 0, y:y + side, x:x + side] = col
        out[i, 1, y + dy:y + dy + side, x + dx:x + dx + side] = col
    return torch.from_numpy(out)


def time_config(cfg: TrainConfig, steps: int, warmup: int = 3) -> dict:
    torch.manual_seed(0)
    torch.set_num_threads(cfg.threads or 1)
    torch.set_flush_denormal(True)
    model = FlowCapsules(cfg.model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    pairs = synthetic_pairs(cfg.batch_size, cfg.model.image_size)
    img0, img1 = to_images(pairs, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)

    def step() -> None:
        terms = pair_loss(model, img0, img1, cfg, gen)
        opt.zero_grad(set_to_none=True)
        terms.total.backward()
        opt.step()

    fn = torch.compile(step) if cfg.compile else step
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    warm_s = time.perf_counter() - t0
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    return {"pairs_per_s": round(cfg.batch_size / med, 1), "step_ms": round(1000 * med, 1),
            "warmup_s": round(warm_s, 1)}


@click.command()
@click.option("--steps", default=10, show_default=True)
@click.option("--no-compile", is_flag=True, help="skip the torch.compile row (about 30 s+)")
@click.option("--out", default="results/bench/flowcaps.json", show_default=True)
def main(steps: int, no_compile: bool, out: str) -> None:
    t_start = time.time()
    # One thread per process, as each of the 2 ranks runs in the quick run; "2 threads" is a row.
    base = PROFILES["quick"]().replace(threads=1)
    rows = []

    def run(name: str, cfg: TrainConfig, size: int) -> None:
        cfg = cfg.replace(model={"image_size": size})
        res = {"name": name, "size": size, **time_config(cfg, steps)}
        rows.append(res)
        click.echo(json.dumps(res))

    for size in (32, 64, 128):
        run("quick profile", base, size)
    run("no pixel sampling (points=0, full grid)", base.replace(points=0), 64)
    run("concatenated first decoder layer", base.replace(model={"split_first_layer": False}), 64)
    run("bf16 autocast on", base.replace(bf16=True), 64)
    run("one direction only (both_directions off)", base.replace(both_directions=False), 64)
    run("no blur pyramid (blur_sigmas=(0,))", base.replace(blur_sigmas=(0.0,)), 64)
    run("2 threads", base.replace(threads=2), 64)
    # Two 1-thread processes at once, as `torchrun --nproc-per-node 2` runs them (the gradient
    # all-reduce of ~0.5M parameters is not included; it is small next to a step).
    one = base.replace(threads=1, model={"image_size": 64})
    with mp.get_context("spawn").Pool(2) as pool:
        pair = pool.starmap(time_config, [(one, steps), (one, steps)])
    res = {"name": "2 processes x 1 thread at once (sum)", "size": 64,
           "pairs_per_s": round(sum(r["pairs_per_s"] for r in pair), 1),
           "step_ms": max(r["step_ms"] for r in pair), "warmup_s": max(r["warmup_s"] for r in pair)}
    rows.append(res)
    click.echo(json.dumps(res))
    run("paper profile settings at 64 px (full grid)", PROFILES["paper"]().replace(
        points=0, batch_size=base.batch_size), 64)
    if not no_compile:
        run("torch.compile on", base.replace(compile=True), 64)
    load = os.getloadavg()
    record = {"command": " ".join([Path(sys.argv[0]).as_posix()] + sys.argv[1:]),
              "load_average_at_end": [round(x, 2) for x in load],
              "git_commit": git_state()["commit"], "machine": machine_info("cpu"), "steps_timed": steps,
              "batch_size": base.batch_size, "quick_config": json.loads(base.to_json()),
              "rows": rows, "wall_s": round(time.time() - t_start, 1)}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    tmp = out + ".tmp"
    Path(tmp).write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, out)
    click.echo(f"wrote {out}")


if __name__ == "__main__":
    main()
