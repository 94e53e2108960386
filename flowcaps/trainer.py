"""The self-supervised trainer: frame pairs only, no flow or masks. Resumable; DDP-ready.

Letters: N pairs, B batch, T frames, H, W image side.

Under torchrun (WORLD_SIZE > 1) each rank trains on its own contiguous part of the pairs with
DistributedDataParallel (gloo on CPU, nccl on CUDA); rank 0 alone writes files.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from flowcaps import checkpoint, kernel_cache, launch
from flowcaps.allocator import keep_freed_memory
from flowcaps.config import TrainConfig
from flowcaps.errors import FlowcapsError, TrainingInterrupted
from flowcaps.losses import LossTerms, pair_loss
from flowcaps.model import FlowCapsules
from flowcaps.precision import resolve_bf16
from flowcaps.progress import bar_position, run_fraction, training_bar

CKPT_NAME = "checkpoint.pt"  # resumable state of the run
MODEL_NAME = "model.pt"  # exported weights + config, what `train` returns
LOG_NAME = "log.csv"
# One column per loss term after the total (render, smooth, centre, ...), in LossTerms' order.
TERM_FIELDS = tuple(f.name for f in dataclasses.fields(LossTerms) if f.name != "total")
LOG_FIELDS = ("step", "epoch", "pairs", "seconds", "lr", "loss", *TERM_FIELDS, "pairs_per_s")
# Fields that may change between an interrupted run and its resumption (runtime only).
RUNTIME_FIELDS = ("device", "threads", "cpu_ranks")


class _LossModule(nn.Module):
    """Wraps the loss so DistributedDataParallel sees one forward per step."""

    def __init__(self, model: FlowCapsules, cfg: TrainConfig):
        super().__init__()
        self.model = model
        self.cfg = cfg

    def forward(self, img0: torch.Tensor, img1: torch.Tensor, gen: torch.Generator,
                center_scale: torch.Tensor) -> LossTerms:
        return pair_loss(self.model, img0, img1, self.cfg, gen, center_scale)


def _upgrade_log(path: Path) -> None:
    """Rewrite a resumed run's log under the current LOG_FIELDS (columns it lacks left empty)."""
    with open(path, newline="") as f:
        header = next(csv.reader(f), None)
        if header is None or tuple(header) == LOG_FIELDS:
            return
        rows = list(csv.DictReader(f, fieldnames=header))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, LOG_FIELDS, restval="", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def resolve_device(name: str, error: type[Exception] = FlowcapsError) -> torch.device:
    """"auto" -> cuda when there is one, else cpu; `error` (the caller's kind, so the baselines
    share this) when cuda is asked for and absent."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise error("device 'cuda' requested but no CUDA device is available")
    return torch.device(name)


def _split_shards(root: Path, split: str) -> tuple[dict, list]:
    """A dataset's manifest and its split's (shard path, count) list, or a one-line error."""
    from geogen.dataset import open_split
    from geogen.errors import GeogenError

    try:
        part = open_split(root, split)
    except GeogenError as err:
        raise FlowcapsError(f"cannot read {split} split of {root}: {err}") from None
    return part.manifest, list(part.shards)


def _check_size(size: int, cfg: TrainConfig) -> None:
    if size != cfg.model.image_size:
        raise FlowcapsError(f"data is {size} px but model.image_size is {cfg.model.image_size}")


def _check_batch(local: int, world: int, batch: int) -> None:
    if local < batch:
        raise FlowcapsError(f"{local} pairs on each of {world} rank(s) is fewer than one batch "
                            f"of {batch}")


def _preflight(config: TrainConfig, root: Path, ranks: int) -> None:
    """The checks `run` makes on the data, made once before starting the ranks."""
    local = 0
    for r in _roots(config, root):
        manifest, parts = _split_shards(r, "train")
        _check_size(int(manifest.get("size", -1)), config)
        clips = sum(c for _, c in parts)
        clips = clips if config.max_pairs is None else min(clips, config.max_pairs)  # as load_pairs
        local += clips // ranks * max(int(manifest.get("frames", 2)) - 1, 1)
    _check_batch(local, ranks, config.batch_size // ranks)


def _roots(config: TrainConfig, data: Path) -> list[Path]:
    """The dataset folders a run trains on: DATA, then `mix_data` if set."""
    return [data] + ([Path(config.mix_data)] if config.mix_data else [])


def load_pairs(root: str | Path, split: str = "train", limit: int | None = None,
               rank: int = 0, world: int = 1) -> np.ndarray:
    """Frames (N, 2, H, W, 3) uint8: this rank's contiguous part of the first `limit` clips.

    Each of `world` ranks gets limit // world clips (the remainder is dropped so every rank runs
    the same number of steps) and reads only its rows of the shards. A clip of T > 2 frames
    gives T - 1 pairs.
    """
    from geogen.dataset import open_split, pairs  # geogen is only needed when reading a dataset
    from geogen.errors import GeogenError

    root = Path(root)
    try:
        clips = open_split(root, split).read(("frames",), limit, rank=rank, world=world)
        if not len(clips["frames"]):
            raise FlowcapsError(f"{root} has no {split} clips for rank {rank} of {world}")
        return pairs(clips["frames"])  # (N, T, H, W, 3) -> (N * (T - 1), 2, H, W, 3)
    except GeogenError as err:  # a bad folder, request or shard: one line for the user
        raise FlowcapsError(f"cannot read {split} split of {root}: {err}") from None


def to_images(batch: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 (B, 2, H, W, 3) -> two float (B, 3, H, W) in [0, 1]."""
    x = batch.to(device).permute(0, 1, 4, 2, 3).float() / 255  # (B, 2, 3, H, W)
    return x[:, 0].contiguous(), x[:, 1].contiguous()


def _lr_factor(cfg: TrainConfig, step: int, progress: float) -> float:
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "cosine":
        # Cosine decay to 2% over the run; `progress` is the larger of the step and time fractions,
        # so a time-budgeted run still anneals before it stops.
        return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return 1.0


def _fade(progress: float, span: float) -> float:
    """1 at the start, falling linearly to 0 at `span` of the run (prior_anneal)."""
    return max(0.0, 1.0 - progress / span)


def _check_resume(saved: TrainConfig, cfg: TrainConfig, path: Path) -> None:
    a = {k: v for k, v in saved.__dict__.items() if k not in RUNTIME_FIELDS}
    b = {k: v for k, v in cfg.__dict__.items() if k not in RUNTIME_FIELDS}
    diff = sorted(k for k in a if a[k] != b[k])
    if diff:
        raise FlowcapsError(f"{path} was made with a different config (fields {diff}); "
                            f"use a new --out folder or the same settings")


def _init_blob(cfg: TrainConfig) -> dict[str, Any]:
    """`cfg.init`'s checkpoint, or a one-line error if it is missing, foreign or of another model."""
    blob = checkpoint.read(cfg.init)
    saved = checkpoint.config_of(blob).model
    if saved != cfg.model:
        diff = sorted(k for k, v in saved.__dict__.items() if v != getattr(cfg.model, k))
        raise FlowcapsError(f"init checkpoint {cfg.init} has another model config (fields {diff})")
    return blob


def _load_init(model: FlowCapsules, cfg: TrainConfig) -> dict[str, Any]:
    """Load `cfg.init`'s weights into `model`; returns what the run's meta records of it."""
    blob = _init_blob(cfg)
    model.load_weights(blob["model"])
    digest = hashlib.sha256(Path(cfg.init).read_bytes()).hexdigest()
    return {"path": str(cfg.init), "sha256": digest, "meta": checkpoint.meta_of(blob)}


def _match_compiled_grad_layout(model: nn.Module) -> None:
    """Give a 4-D weight whose two memory formats coincide (a 1x1 conv) channels-last strides.

    Its bytes are the same either way, but DDP compares a gradient's strides with the weight's
    literally, and the compiled backward returns such a gradient with channels-last strides.
    """
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 4 and p.is_contiguous() and p.is_contiguous(
                    memory_format=torch.channels_last):
                p.set_(torch.empty_like(p, memory_format=torch.channels_last).copy_(p))


def _dist_setup(device: torch.device) -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size()


def _agree(value: float, world: int, device: torch.device) -> float:
    """The mean of a number over the ranks (itself without DDP); NaN anywhere gives NaN."""
    return _agree_all([value], world, device)[0]


def _agree_all(values: list[float], world: int, device: torch.device) -> list[float]:
    """`_agree` for several numbers in one collective."""
    if world <= 1:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)  # nccl needs a CUDA tensor
    dist.all_reduce(t)
    return (t / world).tolist()


def _check_run_folder(cfg: TrainConfig, ranks: int) -> None:
    """The run folder: usable, and any checkpoint there one this run can resume."""
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise FlowcapsError(f"--out {out} exists and is not a folder")
    ckpt_path = out / CKPT_NAME
    if ckpt_path.exists():  # the ranks store their own config (launch.per_rank_config)
        saved = checkpoint.config_of(checkpoint.read(ckpt_path))
        _check_resume(saved, launch.per_rank_config(cfg, ranks) if ranks > 1 else cfg, ckpt_path)
    elif cfg.init:
        _init_blob(cfg)


def train(config: TrainConfig, data: str | Path, *, progress: bool = True) -> Path:
    """Train from a geogen dataset root; returns the exported model path (`out/model.pt`).

    Every setting, the data, the run folder and `init` are checked before training starts
    (and before the ranks start, when there are several)."""
    config.validate()
    ranks = launch.ranks_for(config, resolve_device(config.device).type)
    if "RANK" not in os.environ:  # the launcher checked these before it started the ranks
        _check_run_folder(config, ranks)
    if ranks > 1:
        _preflight(config, Path(data), ranks)
        return launch.launch(config, data, ranks, progress)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    parts = [load_pairs(r, "train", config.max_pairs, rank, world) for r in _roots(config, Path(data))]
    pairs = parts[0] if len(parts) == 1 else np.concatenate(parts)  # (N_rank, 2, H, W, 3)
    return run(config, pairs, progress=progress, meta={"data": str(data)}, rank_part=True,
               mix_from=len(parts[0]) if len(parts) > 1 else None)[1]


def fit(config: TrainConfig, pairs: np.ndarray, *, progress: bool = True,
        meta: dict[str, Any] | None = None) -> Path:
    """Train on in-memory pairs (N, 2, H, W, 3) uint8; resumes from `out/checkpoint.pt`."""
    if config.mix_data is not None:
        raise FlowcapsError("mix_data is read by train(config, DATA); fit trains on its pairs only")
    return run(config, pairs, progress=progress, meta=meta)[1]


def mix_batch(mix_from: int, local: int, batch: int, seed: int) -> torch.Tensor:
    """A batch drawn (with replacement) from rows [mix_from, local): mix_data's pairs only."""
    return mix_from + torch.randint(local - mix_from, (batch,),
                                    generator=torch.Generator().manual_seed(seed))  # (batch,)


def run(config: TrainConfig, pairs: np.ndarray, *, progress: bool = True,
        meta: dict[str, Any] | None = None, rank_part: bool = False,
        mix_from: int | None = None) -> tuple[FlowCapsules, Path]:
    """`fit`, also returning this rank's trained model (every rank has one under DDP).

    Under DDP `pairs` is split into equal contiguous parts by rank, unless `rank_part` says it
    already is this rank's part (as `train` reads it). `mix_from`: where this rank's part of
    `mix_data`'s pairs starts (`train` puts them last), for `mix_first`.
    """
    config.validate()
    cfg = config
    if pairs.ndim != 5 or pairs.shape[1] != 2 or pairs.dtype != np.uint8:
        raise FlowcapsError(f"pairs must be uint8 (N, 2, H, W, 3), got {pairs.dtype}{list(pairs.shape)}")
    _check_size(pairs.shape[2], cfg)
    _check_size(pairs.shape[3], cfg)
    device = resolve_device(cfg.device)
    rank, world = _dist_setup(device)
    if world > 1:
        launch.defer_interrupts()
    if device.type == "cpu":
        # One thread per core: on this 2-core machine 2 ranks x 1 thread beat 1 rank x 2 threads.
        torch.set_num_threads(cfg.threads or max(1, (os.cpu_count() or 1) // world))
        # Flat-coloured images give tiny gradients; denormal floats are very slow on x86.
        torch.set_flush_denormal(True)
        keep_freed_memory()  # no page faults for each step's activations: 1.2-1.3x the pairs
    local = len(pairs) if rank_part else len(pairs) // world
    _check_batch(local, world, cfg.batch_size)
    part = pairs if rank_part else pairs[rank * local:(rank + 1) * local]
    data = torch.from_numpy(part)  # (N_rank, 2, H, W, 3)
    if device.type == "cuda" and data.nbytes < torch.cuda.mem_get_info(device)[0] // 4:
        data = data.to(device)  # uint8 on the GPU: no host copy per step
    steps_per_epoch = local // cfg.batch_size
    total_steps = steps_per_epoch * cfg.epochs
    out = Path(cfg.out)
    ckpt_path, model_path = out / CKPT_NAME, out / MODEL_NAME

    torch.manual_seed(cfg.seed)  # the initial weights: identical on every rank
    model = FlowCapsules(cfg.model).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    state = {"step": 0, "train_seconds": 0.0, "pairs": 0}
    if ckpt_path.exists():
        blob = checkpoint.read(ckpt_path)
        _check_resume(checkpoint.config_of(blob), cfg, ckpt_path)
        model.load_weights(blob["model"])
        if "optimizer" in blob:
            opt.load_state_dict(blob["optimizer"])
        state.update(json.loads(blob.get("progress", "{}")))
        started_from = checkpoint.meta_of(blob).get("init")
        if started_from:  # keep what the run started from
            meta = {**(meta or {}), "init": started_from}
    elif cfg.init:
        meta = {**(meta or {}), "init": _load_init(model, cfg)}
    bf16 = resolve_bf16(cfg.bf16, device)
    meta = {**(meta or {}), "pairs_total": local * world, "world_size": world, "bf16": bf16}

    step_fn: nn.Module = _LossModule(model, cfg.replace(bf16=bf16))
    if cfg.compile:
        # Compile the loss, not the DDP wrapper around it: DDP's forward (a profiler
        # record_function) then stays eager, and dynamo still splits the graph at DDP's buckets.
        step_fn = kernel_cache.compiled(step_fn)
        if world > 1:
            _match_compiled_grad_layout(model)
    if world > 1:
        step_fn = nn.parallel.DistributedDataParallel(step_fn)

    def save_ckpt() -> None:
        if rank == 0:
            checkpoint.save(ckpt_path, cfg, model, optimizer=opt, progress=state, meta=meta)

    budget = cfg.max_minutes * 60 if cfg.max_minutes else math.inf
    log_file = None
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        new_log = not (out / LOG_NAME).exists()
        if not new_log:
            _upgrade_log(out / LOG_NAME)
        log_file = open(out / LOG_NAME, "a", newline="")
        writer = csv.writer(log_file)
        if new_log:
            writer.writerow(LOG_FIELDS)
    bar = training_bar(total_steps, budget, state, disable=not progress or rank != 0)
    recent: list[float] = []
    last_ckpt = time.monotonic()
    window_t, window_pairs = time.monotonic(), 0
    stop_reason = "epochs"
    perm, perm_epoch = torch.empty(0, dtype=torch.long), -1
    try:
        while state["step"] < total_steps:
            step = state["step"]
            epoch = step // steps_per_epoch
            if perm_epoch != epoch:
                # One permutation per (seed, rank, epoch), so a resumed run sees the same order.
                perm = torch.randperm(local, generator=torch.Generator().manual_seed(
                    cfg.seed * 100003 + rank * 7919 + epoch))
                perm_epoch = epoch
            pos = step % steps_per_epoch
            sel = perm[pos * cfg.batch_size:(pos + 1) * cfg.batch_size]
            frac = run_fraction(step, total_steps, state["train_seconds"], budget)
            if frac < cfg.mix_first and mix_from is not None:
                sel = mix_batch(mix_from, local, cfg.batch_size, cfg.seed * 100003 + rank * 7919 + step)
            # On a GPU the points are drawn there (losses.sample_indices).
            gen = torch.Generator(device=device).manual_seed(
                cfg.seed * 1000003 + rank * 10007 + step)
            t0 = time.monotonic()
            img0, img1 = to_images(data[sel], device)
            lr = cfg.lr * _lr_factor(cfg, step, frac)
            for group in opt.param_groups:
                group["lr"] = lr
            center_scale = min(1.0, frac / cfg.center_warmup) if cfg.center_warmup > 0 else 1.0
            if cfg.prior_anneal > 0 and hasattr(model.encoder, "prior_gain"):
                model.encoder.prior_gain.fill_(_fade(frac, cfg.prior_anneal))
            # A tensor, not a float: torch.compile would specialise (recompile) on every value.
            terms = step_fn(img0, img1, gen, torch.tensor(center_scale, device=device))
            loss = _agree(float(terms.total.detach()), world, device)  # every rank decides alike
            median = statistics.median(recent) if len(recent) >= 20 else math.inf
            if not math.isfinite(loss) or loss > cfg.explode_factor * median:
                what = "not finite" if not math.isfinite(loss) else f"exploded ({loss:.3g})"
                raise FlowcapsError(f"loss {what} at step {step}; stopped, last good checkpoint "
                                    f"kept at {ckpt_path}")
            opt.zero_grad(set_to_none=True)
            terms.total.backward()
            if cfg.grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            recent = (recent + [loss])[-200:]
            state["step"] = step + 1
            state["pairs"] += len(sel) * world
            # The ranks' clocks differ (rank 0 also logs), so they add the mean step time and
            # stop at the same step; a rank left alone in a collective would hang.
            seconds, stopping = _agree_all([time.monotonic() - t0, float(launch.stop_requested())],
                                           world, device)
            state["train_seconds"] += seconds
            window_pairs += len(sel) * world
            if rank == 0 and (state["step"] % cfg.log_every == 0 or state["step"] == total_steps):
                rate = window_pairs / max(time.monotonic() - window_t, 1e-9)
                window_t, window_pairs = time.monotonic(), 0
                writer.writerow([state["step"], epoch, state["pairs"],
                                 f"{state['train_seconds']:.1f}", f"{lr:.3g}", f"{loss:.5g}",
                                 *(f"{float(getattr(terms, n).detach()):.5g}" for n in TERM_FIELDS),
                                 f"{rate:.1f}"])
                log_file.flush()
                bar.set_postfix({"step": state["step"], "loss": f"{loss:.4f}",
                                "pairs/s": f"{rate:.0f}"})
            bar.update(bar_position(state["step"], total_steps, state["train_seconds"], budget)
                       - bar.n)
            if time.monotonic() - last_ckpt > cfg.checkpoint_minutes * 60:
                save_ckpt()
                last_ckpt = time.monotonic()
            if stopping:  # a rank's SIGINT, seen by all of them at this step
                save_ckpt()
                dist.barrier()  # the checkpoint is on disk before any rank reports
                raise TrainingInterrupted(ckpt_path, state["step"])
            if state["train_seconds"] >= budget:
                stop_reason = "time budget"
                break
    except KeyboardInterrupt:
        save_ckpt()
        raise TrainingInterrupted(ckpt_path, state["step"]) from None
    finally:
        bar.close()
        if log_file is not None:
            log_file.close()
    state["stop_reason"] = stop_reason
    save_ckpt()
    if rank == 0:
        checkpoint.save(model_path, cfg, model, meta={**meta, **state})
    if world > 1:
        dist.barrier()
    return model, model_path
