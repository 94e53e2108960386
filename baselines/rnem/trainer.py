"""The R-NEM trainer: clips of frames only. Seeded, resumable, stops on a NaN.

Letters: N clips, B batch, T frames, K groups, C channels, H, W the model's work side.

Every random draw of a step (the batch, the input corruption, gamma's start) comes from a
generator seeded by (seed, step), so a resumed run continues exactly as an uninterrupted one.
"""
from __future__ import annotations

import csv
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F
from tqdm import tqdm

from baselines.rnem import checkpoint
from baselines.rnem.config import TrainConfig
from baselines.rnem.errors import RnemError
from baselines.rnem.losses import rnem_loss
from baselines.rnem.model import RNEM, schedule
from flowcaps.trainer import resolve_device

CKPT_NAME = "checkpoint.pt"  # resumable state of the run
MODEL_NAME = "model.pt"  # exported weights + config, what `train` returns
LOG_NAME = "log.csv"
LOG_FIELDS = ("step", "clips", "seconds", "loss", "intra", "inter", "clips_per_s")
RUNTIME_FIELDS = ("device", "threads", "out")  # may differ when a run is resumed


def load_clips(root: str | Path, cfg: TrainConfig, split: str = "train") -> np.ndarray:
    """The first `max_clips` clips of a geogen split, cut to `clip_frames` frames and brought
    to the model's work side: uint8 (N, T, C, H, W). Read shard by shard in chunks, so the
    full-size frames are never all in memory at once."""
    from geogen.dataset import open_split
    from geogen.errors import GeogenError
    root = Path(root)
    try:
        part = open_split(root, split)
    except GeogenError as err:  # a geogen error: one line for the user
        raise RnemError(f"cannot read the {split} split of {root}: {err}") from None
    if part.size != cfg.model.image_size:
        raise RnemError(f"{root} holds {part.size} px images but model.image_size is "
                        f"{cfg.model.image_size}")
    n = part.count if cfg.max_clips is None else min(part.count, cfg.max_clips)
    if n == 0:
        raise RnemError(f"{root} has no {split} clips")
    t, side = min(part.frames, cfg.clip_frames), cfg.model.work_size
    f = cfg.model.image_size // side
    try:
        pieces = part.chunks(("frames",), n, t={"frames": slice(0, t)}, chunk=1024)  # checks n
        out = np.empty((n, t, 3, side, side), np.uint8)
        for at, piece in pieces:
            x = torch.from_numpy(piece["frames"])  # (n, T, H, W, C)
            x = x.permute(0, 1, 4, 2, 3).float()  # (n, T, C, H, W)
            if f > 1:
                x = F.avg_pool2d(x.flatten(0, 1), f).view(*x.shape[:3], side, side)
            out[at:at + len(x)] = x.round().clamp(0, 255).to(torch.uint8).numpy()
    except GeogenError as err:
        raise RnemError(f"cannot read the {split} split of {root}: {err}") from None
    return out


def corrupt(x: torch.Tensor, prob: float, gen: torch.Generator) -> torch.Tensor:
    """Masked-uniform noise (N-EM's choice for real-valued data): each value is replaced by a
    uniform draw in [0, 1] with probability `prob`."""
    if prob == 0:
        return x
    mask = torch.rand(x.shape, generator=gen, device=gen.device).to(x.device) < prob
    noise = torch.rand(x.shape, generator=gen, device=gen.device).to(x.device)
    return torch.where(mask, noise, x)


def clip_loss(model: RNEM, clip: torch.Tensor, cfg: TrainConfig,
              gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean over the EM steps of R-NEM's loss on a float clip (B, T, C, H, W) in [0, 1]:
    (total, intra, inter)."""
    m = cfg.model
    inputs = corrupt(clip, cfg.noise_prob, gen)  # (B, T, C, H, W)
    states = model.run(clip, gen, inputs=inputs)
    steps = schedule(clip.shape[1], m.em_steps)
    terms = [rnem_loss(s.mu, s.gamma, clip[:, t_out], m.sigma, m.prior_mean)
             for s, (_, t_out) in zip(states, steps)]
    n = len(terms)
    return (sum(t.total for t in terms) / n, sum(t.intra for t in terms) / n,
            sum(t.inter for t in terms) / n)


def _check_resume(saved: TrainConfig, cfg: TrainConfig, path: Path) -> None:
    a = {k: v for k, v in saved.__dict__.items() if k not in RUNTIME_FIELDS}
    b = {k: v for k, v in cfg.__dict__.items() if k not in RUNTIME_FIELDS}
    diff = sorted(k for k in a if a[k] != b[k])
    if diff:
        raise RnemError(f"{path} was made with a different config (fields {diff}); use a new "
                        f"output folder or the same settings")


def train(config: TrainConfig, data: str | Path, *, progress: bool = True) -> Path:
    """Train from a geogen dataset root; returns the exported model (`out/model.pt`)."""
    config.validate()
    clips = load_clips(data, config)
    return fit(config, clips, progress=progress, meta={"data": str(data)})


def fit(cfg: TrainConfig, clips: np.ndarray, *, progress: bool = True,
        meta: dict[str, Any] | None = None) -> Path:
    """Train on in-memory clips uint8 (N, T, C, H, W) at the work side; resumes from
    `out/checkpoint.pt` when it is there."""
    cfg.validate()
    side = cfg.model.work_size
    if clips.ndim != 5 or clips.shape[2:] != (3, side, side) or clips.dtype != np.uint8:
        raise RnemError(f"clips must be uint8 (N, T, 3, {side}, {side}), got "
                        f"{clips.dtype}{list(clips.shape)}")
    if len(clips) < cfg.batch_size:
        raise RnemError(f"{len(clips)} clips is fewer than one batch of {cfg.batch_size}")
    device = resolve_device(cfg.device, RnemError)
    if device.type == "cpu":
        torch.set_num_threads(cfg.threads or os.cpu_count() or 1)
        torch.set_flush_denormal(True)  # denormal floats are very slow on x86
    out = Path(cfg.out)
    ckpt_path, model_path = out / CKPT_NAME, out / MODEL_NAME

    torch.manual_seed(cfg.seed)  # the initial weights
    model = RNEM(cfg.model).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    state: dict[str, Any] = {"step": 0, "train_seconds": 0.0, "clips": 0}
    if ckpt_path.exists():
        blob = checkpoint.read(ckpt_path)
        _check_resume(checkpoint.config_of(blob), cfg, ckpt_path)
        model.load_weights(blob["model"])
        if "optimizer" in blob:
            opt.load_state_dict(blob["optimizer"])
        state.update(json.loads(blob.get("progress", "{}")))
    meta = {**(meta or {}), "clips_total": int(len(clips)), "clip_frames": int(clips.shape[1])}
    data = torch.from_numpy(clips)  # (N, T, C, H, W) uint8

    def save_ckpt() -> None:
        checkpoint.save(ckpt_path, cfg, model, optimizer=opt, progress=state, meta=meta)

    budget = cfg.max_minutes * 60 if cfg.max_minutes else math.inf
    out.mkdir(parents=True, exist_ok=True)
    new_log = not (out / LOG_NAME).exists()
    log_file = open(out / LOG_NAME, "a", newline="")
    writer = csv.writer(log_file)
    if new_log:
        writer.writerow(LOG_FIELDS)
    # The bar runs over the budget that really ends the run: seconds when time-limited.
    timed = math.isfinite(budget)
    bar = tqdm(total=round(budget) if timed else cfg.max_steps,
               initial=min(round(state["train_seconds"]), round(budget)) if timed else state["step"],
               unit="s" if timed else "step", desc="rnem train", disable=not progress)
    recent: list[float] = []
    last_ckpt = time.monotonic()
    window_t, window_clips = time.monotonic(), 0
    stop_reason = "max_steps"
    per_epoch = len(data) // cfg.batch_size
    perm, perm_epoch = torch.empty(0, dtype=torch.long), -1
    model.train()
    try:
        while state["step"] < cfg.max_steps:
            if state["train_seconds"] >= budget:
                stop_reason = "time budget"
                break
            step = state["step"]
            epoch = step // per_epoch
            if perm_epoch != epoch:  # one permutation per (seed, epoch): resumes see the same order
                perm = torch.randperm(len(data), generator=torch.Generator().manual_seed(
                    cfg.seed * 100003 + epoch))
                perm_epoch = epoch
            pos = step % per_epoch
            sel = perm[pos * cfg.batch_size:(pos + 1) * cfg.batch_size]
            gen = torch.Generator(device=device).manual_seed(cfg.seed * 1000003 + step)
            t0 = time.monotonic()
            clip = data[sel].to(device).float() / 255  # (B, T, C, H, W)
            total, intra, inter = clip_loss(model, clip, cfg, gen)
            loss = float(total.detach())
            median = statistics.median(recent) if len(recent) >= 20 else math.inf
            if not math.isfinite(loss) or loss > cfg.explode_factor * median:
                what = "not finite" if not math.isfinite(loss) else f"exploded ({loss:.3g})"
                raise RnemError(f"loss {what} at step {step}; stopped, last good checkpoint "
                                f"kept at {ckpt_path}")
            opt.zero_grad(set_to_none=True)
            total.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            recent = (recent + [loss])[-200:]
            dt = time.monotonic() - t0
            state["step"] = step + 1
            state["clips"] += len(sel)
            state["train_seconds"] += dt
            window_clips += len(sel)
            if state["step"] % cfg.log_every == 0 or state["step"] == cfg.max_steps:
                rate = window_clips / max(time.monotonic() - window_t, 1e-9)
                window_t, window_clips = time.monotonic(), 0
                writer.writerow([state["step"], state["clips"], f"{state['train_seconds']:.1f}",
                                 f"{loss:.5g}", f"{float(intra.detach()):.5g}",
                                 f"{float(inter.detach()):.5g}",
                                 f"{rate:.2f}"])
                log_file.flush()
                bar.set_postfix(step=state["step"], loss=f"{loss:.1f}", clips_s=f"{rate:.1f}")
            bar.update(min(dt, max(budget - bar.n, 0)) if timed else 1)
            if time.monotonic() - last_ckpt > cfg.checkpoint_minutes * 60:
                save_ckpt()
                last_ckpt = time.monotonic()
    except KeyboardInterrupt:
        save_ckpt()
        raise RnemError(f"interrupted at step {state['step']}; run the same command again to "
                        f"resume (checkpoint {ckpt_path})") from None
    finally:
        bar.close()
        log_file.close()
    state["stop_reason"] = stop_reason
    save_ckpt()
    checkpoint.save(model_path, cfg, model, meta={**meta, **state})
    return model_path
