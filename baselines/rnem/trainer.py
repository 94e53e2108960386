"""The R-NEM trainer: clips of frames only; R-NEM's part of the shared training loop
(`trainloop`).

Letters: N clips, B batch, T frames, K groups, C channels, H, W the model's work side.

Every random draw of a step (the batch, the input corruption, gamma's start) comes from a
generator the loop seeds by (seed, step), so a resumed run continues exactly as an
uninterrupted one.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F
from torch import nn

import trainloop
from baselines.rnem import checkpoint
from baselines.rnem.config import TrainConfig
from baselines.rnem.errors import RnemError
from baselines.rnem.losses import rnem_loss
from baselines.rnem.model import RNEM, schedule

CKPT_NAME, MODEL_NAME, LOG_NAME = trainloop.CKPT_NAME, trainloop.MODEL_NAME, trainloop.LOG_NAME
VAL_SEED = 0  # the validation loss's noise and gamma start, the same at every evaluation


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


def clip_loss(model: RNEM, clip: torch.Tensor, cfg: TrainConfig, gen: torch.Generator
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean over the EM steps of R-NEM's loss on a float clip (B, T, C, H, W) in [0, 1]:
    (total, intra, inter), and the last step's gamma (B, K, 1, H, W)."""
    m = cfg.model
    inputs = corrupt(clip, cfg.noise_prob, gen)  # (B, T, C, H, W)
    states = model.run(clip, gen, inputs=inputs)
    steps = schedule(clip.shape[1], m.em_steps, m.warmup)
    terms = [rnem_loss(s.mu, s.gamma, clip[:, t_out], m.sigma, s.prior)
             for s, (_, t_out) in zip(states, steps)]
    n = len(terms)
    return (sum(t.total for t in terms) / n, sum(t.intra for t in terms) / n,
            sum(t.inter for t in terms) / n, states[-1].gamma)


def groups_used(gamma: torch.Tensor, min_area: float = 0.005) -> float:
    """How many groups a clip uses, averaged over the batch: those that win (gamma > 1/2) at
    least `min_area` of the pixels. A collapse shows as 1 (one group on every shape); a shape
    of Geo covers about 3 % of the image. gamma: (B, K, 1, H, W)."""
    won = (gamma > 0.5).flatten(2).float().mean(-1)  # (B, K)
    return float((won >= min_area).float().sum(1).mean())


class RnemTask(trainloop.Task):
    """R-NEM's step in the shared loop, and its validation loss for early stopping."""

    name, unit, store = "rnem", "clips", checkpoint
    extra_fields = ("groups",)  # groups_used of the last step's batch: a collapse shows as 1

    def __init__(self, cfg: TrainConfig, val: torch.Tensor | None = None):
        self.config = cfg
        self.val = val  # uint8 (N, T, C, H, W) validation clips, or None
        self._groups = 0.0  # groups_used at the last step, for the log

    def validation_loss(self, model: nn.Module, device: torch.device) -> float | None:
        """The training loss on the validation clips, noise included (as R-NEM's validation
        graph), from one fixed generator: the same draws at every evaluation."""
        if self.val is None:
            return None
        gen = torch.Generator(device=device).manual_seed(VAL_SEED)
        total, b = 0.0, self.config.loop.batch_size
        for at in range(0, len(self.val), b):
            clip = self.val[at:at + b].to(device).float() / 255  # (B, T, C, H, W)
            total += float(clip_loss(model, clip, self.config, gen)[0]) * len(clip)
        return total / len(self.val)

    def build(self, device: torch.device) -> RNEM:
        return RNEM(self.config.model).to(device).train()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=self.config.lr)

    def step(self, loss_fn: nn.Module, rows: tuple[torch.Tensor, ...], gen: torch.Generator,
             ctx: trainloop.StepContext) -> trainloop.loop.Losses:
        clip = rows[0].to(ctx.device).float() / 255  # (B, T, C, H, W)
        total, intra, inter, gamma = clip_loss(loss_fn, clip, self.config, gen)
        self._groups = groups_used(gamma.detach())
        return total, {"intra": intra, "inter": inter}

    def log_values(self, model: nn.Module) -> dict[str, Any]:
        return {"groups": f"{self._groups:.2f}"}


def train(config: TrainConfig, data: str | Path, *, progress: bool = True) -> Path:
    """Train from a geogen dataset root; returns the exported model (`out/model.pt`)."""
    config.validate()
    clips = load_clips(data, config)
    val = (load_clips(data, config.replace(max_clips=config.val_clips), split="val")
           if config.val_clips else None)
    return fit(config, clips, val=val, progress=progress, meta=_data_meta(data))


def _data_meta(data: str | Path) -> dict[str, Any]:
    with trainloop.errors_as(RnemError):
        return trainloop.data_meta(data)


def run_loop(cfg: TrainConfig, rows: int) -> trainloop.LoopConfig:
    """The run's loop for `rows` training clips: validation once an epoch where the config's
    `loop.eval_every` is None, none without validation clips."""
    every = cfg.loop.eval_every or max(1, rows // cfg.loop.batch_size)
    return dataclasses.replace(cfg.loop, eval_every=every if cfg.val_clips else None)


def _check(clips: np.ndarray, cfg: TrainConfig, what: str) -> None:
    side = cfg.model.work_size
    if clips.ndim != 5 or clips.shape[2:] != (3, side, side) or clips.dtype != np.uint8:
        raise RnemError(f"{what} must be uint8 (N, T, 3, {side}, {side}), got "
                        f"{clips.dtype}{list(clips.shape)}")


def fit(cfg: TrainConfig, clips: np.ndarray, *, val: np.ndarray | None = None,
        progress: bool = True, meta: dict[str, Any] | None = None) -> Path:
    """Train on in-memory clips uint8 (N, T, C, H, W) at the work side, early-stopping on the
    loss of `val` (clips of the same form) when given; resumes from `out/checkpoint.pt` when
    it is there."""
    cfg.validate()
    _check(clips, cfg, "clips")
    if val is not None:
        _check(val, cfg, "validation clips")
    meta = {**(meta or {}), "clip_frames": int(clips.shape[1]),
            "val_clips": 0 if val is None else len(val)}
    task = RnemTask(cfg, None if val is None else torch.from_numpy(val))
    with trainloop.errors_as(RnemError):
        return trainloop.fit(task, run_loop(cfg, len(clips)), torch.from_numpy(clips),
                             progress=progress, meta=meta)[1]
