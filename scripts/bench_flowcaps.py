"""Training speed of flowcaps: pairs/s at 32, 64 and 128 px, and the ablation of each speed lever.

Each row times full training steps (loss, backward, Adam) of one rank of the quick profile
(1 thread, half its batch, compiled, float32 as the profile sets it) on synthetic moving-square
pairs (speed does not depend on the content once denormals are flushed), after warm-up steps,
taking the median step time. Levers at 64 px, each changed alone: bf16, torch.compile, pixel
sampling (points=0 evaluates the full grid), the split first decoder layer, both directions,
the blur pyramid, the allocator thresholds, threads against processes. Writes
results/bench/flowcaps-<cpu>.json (ten to twenty minutes: each compiled row compiles afresh).
FLOPs per pair, every method and the fraction of the matmul peak: `flowbench bench`.

    .venv/bin/python scripts/bench_flowcaps.py [--steps 10] [--out PATH]
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import click
import torch

from benchmark.bench import cpu_slug, median_step, synthetic_pairs
from benchmark.records import git_state, machine_info
from flowcaps import PROFILES, TrainConfig, kernel_cache
from trainloop.allocator import keep_freed_memory
from flowcaps.losses import pair_loss
from flowcaps.model import FlowCapsules
from flowcaps.precision import cpu_has_native_bf16
from flowcaps.trainer import to_images


def time_config(cfg: TrainConfig, steps: int, warmup: int = 3, keep_memory: bool = True) -> dict:
    torch.manual_seed(0)
    torch.set_num_threads(cfg.loop.threads or 1)
    torch.set_flush_denormal(True)
    if keep_memory:  # as the trainer does
        keep_freed_memory()
    model = FlowCapsules(cfg.model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    pairs = torch.from_numpy(synthetic_pairs(cfg.loop.batch_size, cfg.model.image_size))
    img0, img1 = to_images(pairs, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)

    def step() -> None:
        terms = pair_loss(model, img0, img1, cfg, gen)
        opt.zero_grad(set_to_none=True)
        terms.total.backward()
        opt.step()

    fn = kernel_cache.compiled(step) if cfg.compile else step
    med, warm_s = median_step(fn, steps, warmup)
    return {"pairs_per_s": round(cfg.loop.batch_size / med, 1), "step_ms": round(1000 * med, 1),
            "warmup_s": round(warm_s, 1)}


@click.command()
@click.option("--steps", default=10, show_default=True)
@click.option("--out", default=None,
              help="record path [default: results/bench/flowcaps-<cpu>.json, e.g. amd-epyc]")
def main(steps: int, out: str | None) -> None:
    t_start = time.time()
    machine = machine_info("cpu")
    out = out or f"results/bench/flowcaps-{cpu_slug(machine['cpu'])}.json"
    # What one of the quick run's two ranks computes: 1 thread, half the batch, compiled, in the
    # profile's precision (float32). Each lever row changes one thing from it.
    quick = PROFILES["quick"]()
    base = quick.replace(loop={"threads": 1, "batch_size": quick.loop.batch_size // 2}, cpu_ranks=1)
    bf16 = base.bf16
    rows = []

    def run(name: str, cfg: TrainConfig, size: int = 64, keep_memory: bool = True) -> None:
        cfg = cfg.replace(model={"image_size": size})
        if keep_memory:
            timed = time_config(cfg, steps)
        else:  # this process's allocator cannot be set back: a fresh one times glibc's defaults
            with mp.get_context("spawn").Pool(1) as pool:
                timed = pool.apply(time_config, (cfg, steps, 3, False))
        res = {"name": name, "size": size, **timed}
        rows.append(res)
        click.echo(json.dumps(res))

    for size in (32, 64, 128):
        run(f"quick profile, one rank (bf16 {'on' if bf16 else 'off'})", base, size)
    run(f"bf16 autocast {'off' if bf16 else 'on'}", base.replace(bf16=not bf16))
    run("torch.compile off", base.replace(compile=False))
    run("torch.compile off, bf16 off", base.replace(compile=False, bf16=False))
    run("no pixel sampling (points=0, full grid)", base.replace(points=0))
    run("one direction only (both_directions off)", base.replace(both_directions=False))
    run("no blur pyramid (blur_sigmas=(0,))", base.replace(blur_sigmas=(0.0,)))
    run("encoder GroupNorm (model.enc_norm=8)", base.replace(model={"enc_norm": 8}))
    run("allocator thresholds off (glibc defaults)", base, keep_memory=False)
    run("2 threads, full batch (one process)",
        base.replace(loop={"threads": 2, "batch_size": quick.loop.batch_size}))
    # Two 1-thread processes at once, as `torchrun --nproc-per-node 2` runs them (the gradient
    # all-reduce of ~0.5M parameters is not included; it is small next to a step).
    with mp.get_context("spawn").Pool(2) as pool:
        pair = pool.starmap(time_config, [(base, steps), (base, steps)])
    res = {"name": "2 processes x 1 thread at once (sum)", "size": 64,
           "pairs_per_s": round(sum(r["pairs_per_s"] for r in pair), 1),
           "step_ms": max(r["step_ms"] for r in pair), "warmup_s": max(r["warmup_s"] for r in pair)}
    rows.append(res)
    click.echo(json.dumps(res))
    run("paper profile settings (full grid, not compiled)", PROFILES["paper"]().replace(
        points=0, loop={"batch_size": base.loop.batch_size, "threads": 1}))
    load = os.getloadavg()
    record = {"command": " ".join([Path(sys.argv[0]).as_posix()] + sys.argv[1:]),
              "load_average_at_end": [round(x, 2) for x in load],
              "git_commit": git_state()["commit"], "machine": machine,
              "cpu_native_bf16": cpu_has_native_bf16(), "steps_timed": steps,
              "batch_size": base.loop.batch_size, "quick_config": json.loads(base.to_json()),
              "rows": rows, "wall_s": round(time.time() - t_start, 1)}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    tmp = out + ".tmp"
    Path(tmp).write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, out)
    click.echo(f"wrote {out}")


if __name__ == "__main__":
    main()
