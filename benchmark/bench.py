"""The compute bench: FLOPs per training row, rows/s and the achieved fraction of the CPU's
float32 matmul peak, per method, as each method's profile trains it (`flowbench bench`).

Letters: B batch (one rank's), H = W image side, T frames, M parts.

Each method's step is its own `trainloop.Task` step (loss, backward, clip, optimiser) on
synthetic rows of the shapes its data has: FLOPs do not depend on the content, and the time of
a step hardly does once denormals are flushed. FLOPs are torch's count (convolutions, matmuls,
attention) of one eager float32 step, forward and backward; the elementwise work, sampling and
the optimiser are not in it, so a step's time is more than its FLOPs explain.

torch and the methods are imported inside the functions, as everywhere in the benchmark.
"""
from __future__ import annotations

import os
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Subject:
    """One method's training step as a profile trains it: its task, one rank's batch of rows,
    the threads of one of its processes and the loop's gradient clip."""

    method: str
    task: Any  # a trainloop.Task
    rows: tuple[Any, ...]  # torch tensors, B rows each
    threads: int
    grad_clip: float | None
    processes: int = 1  # how many such processes the profile trains at once (ranks)

    @property
    def unit(self) -> str:
        return self.task.unit


SUBJECTS: dict[str, Callable[..., Subject]] = {}


def subject(name: str):
    """Register a builder `fn(profile) -> Subject` of a method's step under its name."""
    def add(fn):
        SUBJECTS[name] = fn
        return fn
    return add


def cpu_slug(name: str) -> str:
    """'Intel(R) Xeon(R) Processor' -> 'intel-xeon': a record name, one per kind of CPU."""
    words = re.sub(r"\(r\)|\(tm\)|processor|cpu", " ", name.lower())
    return "-".join(re.findall(r"[a-z0-9]+", words)[:3]) or "cpu"


def synthetic_pairs(n: int, size: int, seed: int = 0) -> np.ndarray:
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
    return out


def matmul_peak(threads: int, n: int = 2048, reps: int = 10) -> float:
    """Float32 GFLOP/s of an n x n matmul on `threads` threads: the best of `reps` (a peak,
    so the best, not the median, of a machine that others share)."""
    import torch
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
        a @ b  # warm-up: the kernel's first call sets up its buffers
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t)
    finally:
        torch.set_num_threads(old)
    return 2 * n ** 3 / best / 1e9


class TrainStep:
    """One training step of a subject as trainloop.fit makes it (fresh model, seed 0), in its
    two halves: `forward` (the task's losses) and `backward` (gradients, clip, optimiser)."""

    def __init__(self, sub: Subject):
        import torch
        from trainloop import StepContext
        torch.manual_seed(0)
        device = torch.device("cpu")
        self.sub, self.task = sub, sub.task
        self.model = self.task.build(device)
        self.opt = self.task.optimizer(self.model)
        self.loss_fn = self.task.loss_module(self.model, 1)  # compiled where the method compiles
        # Half way through the run: the schedules' factors are in their middle, not at an end.
        self.ctx = StepContext(step=0, epoch=0, fraction=0.5, rank=0, world=1,
                               rows=len(sub.rows[0]), device=device, state={})
        self.gen = torch.Generator().manual_seed(0)

    def forward(self) -> Any:
        return self.task.step(self.loss_fn, self.sub.rows, self.gen, self.ctx)[0]

    def backward(self, total: Any) -> None:
        from torch import nn
        self.opt.zero_grad(set_to_none=True)
        total.backward()
        if self.sub.grad_clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.sub.grad_clip)
        self.opt.step()

    def __call__(self) -> None:
        self.backward(self.forward())


def conv_backward_flops(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation,
                        transposed, _output_padding, _groups, output_mask, out_shape=None,
                        **_kwargs) -> int:
    """A conv's backward: its forward's FLOPs once for the input gradient and once for the
    weight gradient, each as asked. torch's own formula counts a grouped conv's weight gradient
    as if the conv were dense, `groups` times too many (33x the forward for a depthwise conv of
    32 channels, where the true backward is 2x); for a dense conv the two agree."""
    from torch.utils.flop_counter import conv_flop_count
    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed=transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def flop_mode(**kwargs):
    """torch's `FlopCounterMode` with `conv_backward_flops` in place of its own formula."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    fixed = {torch.ops.aten.convolution_backward: conv_backward_flops}
    return FlopCounterMode(display=False, custom_mapping=fixed, **kwargs)


def count_flops(sub: Subject, depth: int = 3) -> tuple[int, dict[str, int]]:
    """FLOPs of one eager step of `sub` (forward and backward), and the forward's per module
    down to `depth` dots below the model (a module's count includes its children's). Per
    module the forward alone: torch's counter gives a backward op to whichever module's hook
    ran last, not always the one whose forward made it; a conv's or a linear layer's backward
    is twice its forward (once for the first layer, which has no input gradient)."""
    import torch
    torch.set_num_threads(1)
    step = TrainStep(sub)
    step()  # the optimiser's state exists from here on, as in training
    with flop_mode(depth=depth + 1) as fwd:
        total = step.forward()
    with flop_mode() as bwd:
        step.backward(total)
    per_module = {name: int(sum(ops.values())) for name, ops in fwd.get_flop_counts().items()
                  if name != "Global"}
    return int(fwd.get_total_flops() + bwd.get_total_flops()), per_module


def time_steps(sub: Subject, steps: int, warmup: int = 3) -> dict[str, float]:
    """Median step time of `sub` on its threads after `warmup` steps; rows/s of one process."""
    import torch
    from trainloop.allocator import keep_freed_memory
    torch.set_num_threads(sub.threads)
    torch.set_flush_denormal(True)
    keep_freed_memory()  # as the shared loop's processes run
    med, warm_s = median_step(TrainStep(sub), steps, warmup)
    return {"rows_per_s": len(sub.rows[0]) / med, "step_ms": 1000 * med, "warmup_s": warm_s}


def median_step(fn: Callable[[], None], steps: int, warmup: int = 3) -> tuple[float, float]:
    """The median seconds of `steps` calls of `fn` after `warmup` calls, and the warm-up's
    seconds (where a compiled step compiles)."""
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    warm_s = time.perf_counter() - t0
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), warm_s


def bench_row(sub: Subject, steps: int, peaks: dict[int, float],
              trained: Subject | None = None) -> dict[str, Any]:
    """FLOPs and eager float32 speed of one subject, and the speed of `trained` (the same step
    as its profile trains it: compiled, bf16 where it is on), each with the fraction of the
    matmul peak its process's threads reach: FLOPs/row x rows/s / peak."""
    flops, per_module = count_flops(sub)
    rows = len(sub.rows[0])
    row: dict[str, Any] = {"method": sub.method, "unit": sub.unit, "batch": rows,
                           "threads": sub.threads, "processes": sub.processes,
                           "mflop_per_row": round(flops / rows / 1e6, 2),
                           "forward_mflop_per_row_by_module": {
                               k: round(v / rows / 1e6, 2) for k, v in sorted(
                                   per_module.items(), key=lambda kv: -kv[1])}}
    for name, timed in (("eager", sub), ("as_trained", trained)):
        if timed is None:
            continue
        t = time_steps(timed, steps)
        achieved = flops / rows * t["rows_per_s"] / 1e9  # GFLOP/s
        row[name] = {"rows_per_s": round(t["rows_per_s"], 1), "step_ms": round(t["step_ms"], 1),
                     "warmup_s": round(t["warmup_s"], 1), "gflop_per_s": round(achieved, 2),
                     "fraction_of_peak": round(achieved / peaks[sub.threads], 3)}
    return row


# --- each method's step as its profile trains it ---------------------------------------------

@subject("flowcaps")
def _flowcaps(profile: str, as_trained: bool = False, **changes: Any) -> Subject:
    """One rank of the profile (its batch and threads per rank): float32 and eager, or
    `as_trained` (its compile and bf16); `changes` as `flowcaps train --set` takes them."""
    import torch
    from flowcaps import PROFILES
    from flowcaps.launch import per_rank_config, ranks_for
    from flowcaps.trainer import FlowcapsTask
    model = {"image_size": _side(profile), **changes.get("model", {})}
    cfg = PROFILES[profile]().replace(**{**changes, "model": model})
    ranks = ranks_for(cfg, "cpu")
    cfg = per_rank_config(cfg, ranks) if ranks > 1 else cfg
    if not as_trained:
        cfg = cfg.replace(bf16=False, compile=False)
    cfg.validate()
    pairs = torch.from_numpy(synthetic_pairs(cfg.loop.batch_size, cfg.model.image_size))
    return Subject("flowcaps", FlowcapsTask(cfg), (pairs,), cfg.loop.threads or 1,
                   cfg.loop.grad_clip or None, processes=ranks)


@subject("psd")
def _psd(profile: str) -> Subject:
    """Stage 1 (the motion encoder trains; stage 2 freezes it)."""
    import torch
    from baselines.psd import PROFILES
    from baselines.psd.trainer import PsdTask
    cfg = PROFILES[profile].replace(model={"image_size": _side(profile)})
    b, size = cfg.loop.batch_size, cfg.model.image_size
    frames = torch.from_numpy(synthetic_pairs(b, size))
    flow = torch.randn(b, size, size, 2, generator=torch.Generator().manual_seed(0)).half()
    return Subject("psd", PsdTask(cfg, frames, flow), (frames, flow), cfg.loop.threads or _cores(), None)


@subject("rnem")
def _rnem(profile: str) -> Subject:
    import torch
    from baselines.rnem import PROFILES
    from baselines.rnem.trainer import RnemTask
    cfg = PROFILES[profile]
    side, t = cfg.model.work_size, cfg.clip_frames
    clips = torch.randint(0, 256, (cfg.loop.batch_size, t, 3, side, side), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(0))  # (B, T, 3, H, W)
    return Subject("rnem", RnemTask(cfg), (clips,), cfg.loop.threads or _cores(), cfg.loop.grad_clip or None)


@subject("scae")
def _scae(profile: str) -> Subject:
    import torch
    from baselines.scae import profile as scae_profile
    from baselines.scae.trainer import ScaeTask
    cfg = scae_profile("scae", profile).replace(pcae={"image_size": _side(profile)})
    size = cfg.pcae.image_size
    images = torch.from_numpy(synthetic_pairs(cfg.loop.batch_size, size)[:, 0].copy())  # (B, H, W, 3)
    return Subject("scae", ScaeTask(cfg), (images,), cfg.loop.threads or _cores(), None)


@subject("flowscae")
def _flowscae(profile: str) -> Subject:
    """The OCAE's step on given parts; making the parts (FlowCapsules' encoder, once per
    image before training) is not in it."""
    import torch
    from baselines.scae import profile as scae_profile
    from baselines.scae.trainer import ScaeTask
    from flowcaps import PROFILES
    m = PROFILES[profile]().model  # the parts' sizes, as from a checkpoint of that profile
    cfg = scae_profile("flowscae", profile).replace(
        parts={"n_parts": m.num_capsules, "n_features": m.shape_dim + 1})
    p = cfg.parts
    gen = torch.Generator().manual_seed(0)
    parts = torch.rand(cfg.loop.batch_size, p.n_parts, 7 + p.n_features, generator=gen)  # (B, M, 7+F)
    return Subject("flowscae", ScaeTask(cfg), (parts,), cfg.loop.threads or _cores(), None)


@subject("motiongrouping")
def _motiongrouping(profile: str) -> Subject:
    """Its input is the generator's flow: synthetic flows of Geo's size, in pixels."""
    import torch
    from baselines.motiongrouping import PROFILES
    from baselines.motiongrouping.trainer import MotionGroupingTask
    cfg = PROFILES[profile].replace(model={"image_size": _side(profile)})
    side = cfg.model.image_size
    gen = torch.Generator().manual_seed(0)
    flow = 3 * torch.randn(cfg.loop.batch_size, side, side, 2, generator=gen)  # (B, H, W, 2)
    # No clip: the official has none and neither has its loop config.
    return Subject("motiongrouping", MotionGroupingTask(cfg), (flow,), cfg.loop.threads or _cores(), None)


def _side(profile: str) -> int:
    """The image side of the benchmark profile's data, which flowbench trains each method at."""
    from benchmark.profiles import get_profile
    return get_profile(profile).size


def _cores() -> int:
    return os.cpu_count() or 1


# --- the record ---------------------------------------------------------------------------------

def bench(methods: tuple[str, ...], profile: str = "quick", steps: int = 10,
          flowcaps_changes: dict[str, Any] | None = None,
          echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Every method's row and the machine's peaks: the record `flowbench bench` writes."""
    import torch
    from benchmark.records import git_state, machine_info
    from flowcaps.precision import cpu_has_native_bf16
    started = time.time()
    changes = flowcaps_changes or {}
    subjects = []
    for name in methods:
        if name == "flowcaps":
            subjects.append((SUBJECTS[name](profile, **changes),
                             SUBJECTS[name](profile, as_trained=True, **changes)))
        else:
            subjects.append((SUBJECTS[name](profile), None))
    threads = sorted({1, _cores(), *(s.threads for s, _ in subjects)})
    peaks = {t: matmul_peak(t) for t in threads}
    echo("float32 matmul peak (GFLOP/s): " + ", ".join(f"{t} thread(s) {p:.1f}"
                                                     for t, p in peaks.items()))
    rows = []
    for sub, trained in subjects:
        row = bench_row(sub, steps, peaks, trained)
        rows.append(row)
        speed = "; ".join(f"{k} {row[k]['rows_per_s']} {sub.unit}/s ({row[k]['fraction_of_peak']:.0%} "
                          f"of peak)" for k in ("eager", "as_trained") if k in row)
        echo(f"{sub.method}: {row['mflop_per_row']} MFLOP per {sub.unit[:-1]}; {speed}")
    machine = machine_info("cpu")
    return {"command": None, "git_commit": git_state()["commit"], "profile": profile,
            "flowcaps_changes": changes, "steps_timed": steps,
            "machine": {**machine, "cpu_native_bf16": cpu_has_native_bf16()},
            "matmul_peak_gflop_per_s": {str(t): round(p, 1) for t, p in peaks.items()},
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "rows": rows, "wall_s": round(time.time() - started, 1),
            "torch": torch.__version__}
