"""Peak resident memory of two eager training steps of small configs, against flowcaps.memory.

torch and flowcaps are imported once; each config then runs in a forked child, whose
ru_maxrss is its own high-water mark. The step is the trainer's (FlowcapsTask, Adam, the
allocator thresholds the trainer sets), one rank, one thread.
Usage: PYTHONPATH=. python experiments/2026-12-07-memory-estimate/measure.py
"""
import json
import os
import resource

import torch

from flowcaps.memory import GIB, RUNTIME_BYTES, estimate
from flowcaps.profiles import paper, quick, smoke
from flowcaps.trainer import FlowcapsTask
from trainloop.allocator import keep_freed_memory
from trainloop.loop import StepContext


def two_steps(cfg) -> None:
    task = FlowcapsTask(cfg)
    model = task.build(torch.device("cpu"))
    opt = task.optimizer(model)
    loss_fn = task.loss_module(model, 1)
    gen = torch.Generator().manual_seed(0)
    b, s = cfg.loop.batch_size, cfg.model.image_size
    pairs = torch.randint(0, 256, (b, 2, s, s, 3), dtype=torch.uint8, generator=gen)
    for step in range(2):
        ctx = StepContext(step=step, epoch=0, fraction=0.0, rank=0, world=1, rows=b,
                          device=torch.device("cpu"), state={})
        total, _ = task.step(loss_fn, (pairs,), gen, ctx)
        opt.zero_grad()
        total.backward()
        opt.step()


def peak_of(cfg) -> float:
    """ru_maxrss (bytes) of a forked child that runs two steps of `cfg`."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        two_steps(cfg)
        os.write(write, str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024).encode())
        os._exit(0)
    os.close(write)
    out = os.read(read, 64)
    os.waitpid(pid, 0)
    return float(out)


def configs():
    s = smoke().replace(model={"image_size": 32}, compile=False)
    tiny = s.replace(loop={"batch_size": 4}, points=64)
    yield "smoke 32 px", s
    yield "smoke 32 px, K=64", s.replace(model={"num_capsules": 64})
    yield "b=4, P=64, K=256, Hd=8, depth 2 (occlusion)", \
        tiny.replace(model={"num_capsules": 256, "dec_hidden": 8, "dec_depth": 2})
    yield "b=8, full grid, K=64, Hd=32, depth 6, softmax (decoder)", \
        s.replace(loop={"batch_size": 8}, points=0,
                  model={"num_capsules": 64, "dec_depth": 6, "layering": "softmax",
                         "background": "uniform"})
    yield "quick, one of its 2 ranks (b=16), eager", \
        quick().replace(loop={"batch_size": 16}, compile=False, cpu_ranks=1)
    yield "paper, b=16", paper().replace(loop={"batch_size": 16})


def main():
    keep_freed_memory()
    torch.set_num_threads(1)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"after the imports: {base / GIB:.2f} GiB (the estimate's runtime: "
          f"{RUNTIME_BYTES / GIB:.2f})")
    for name, cfg in configs():
        peak = peak_of(cfg)
        est = estimate(cfg, 1)
        parts = {"+".join(n[:1] for n in k): round(v / GIB, 3) for k, v in est.parts.items()}
        print(f"{name}: peak {peak / GIB:.2f} GiB, estimate {est.per_rank / GIB:.2f} GiB "
              f"({est.per_rank / peak:.2f}x), above the imports {(peak - base) / GIB:.2f} against "
              f"{(est.per_rank - RUNTIME_BYTES) / GIB:.2f}; parts {json.dumps(parts)}", flush=True)


if __name__ == "__main__":
    main()
