"""Guess What Moves' trainer: frame 0 of each training pair goes into the mask network, and
the ground-truth flow 0 -> 1 (the generator's exact flow, as PSD and Motion Grouping get it
here; the official uses RAFT's) is what the masks' fitted flows must reproduce. Its part of the
shared training loop (`trainloop`) is its step, AdamW and the official warm-up + poly schedule.

Letters: N pairs, B batch, K masks, H = W image side.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import trainloop
from baselines.gwm import checkpoint
from baselines.gwm.config import TrainConfig
from baselines.gwm.errors import GwmError
from baselines.gwm.losses import gwm_loss
from baselines.gwm.model import MaskNet

READ_CHUNK = 2048  # pairs converted at a time: the float32 flow is never held whole
TERMS = ("rec",)
WARMUP_FACTOR = 1e-6  # official SOLVER.WARMUP_FACTOR: the rate starts at this fraction


def load_train(root: str | Path, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Frame 0 (N, H, W, 3) uint8 and the flow 0 -> 1 (N, H, W, 2) float16 pixels of the first
    `limit` training clips (float16: 1/64 px steps at 13 px, half the memory)."""
    from geogen.dataset import open_split  # only needed when reading a dataset
    from geogen.errors import GeogenError
    try:
        part = open_split(root, "train")
        if "flow" not in part.fields:
            raise GwmError(f"{root} stores no flow; Guess What Moves trains on ground-truth flow")
        got = part.read(("frames", "flow"), limit, t={"frames": 0, "flow": 0},
                        dtypes={"flow": np.float16}, chunk=READ_CHUNK)
    except GeogenError as err:  # a bad folder, request or shard: one line for the user
        raise GwmError(f"cannot read the train split of {root}: {err}") from None
    if not len(got["frames"]):
        raise GwmError(f"{root} has no train pairs")
    return got["frames"], got["flow"]


def train(config: TrainConfig, data: str | Path, *, progress: bool = True) -> Path:
    """Train on a geogen dataset root (its train split); returns `out/model.pt`."""
    config.validate()
    frames, flow = load_train(data, config.max_pairs)
    with trainloop.errors_as(GwmError):
        meta = trainloop.data_meta(data)  # a resume compares the data's manifest hash too
    return fit(config, frames, flow, progress=progress, meta=meta)


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """detectron2's WarmupPolyLR as the official runs it: a linear warm-up from WARMUP_FACTOR
    over `warmup_steps`, times (1 - step / poly_steps) ** poly_power."""
    warm = 1.0
    if step < cfg.warmup_steps:
        alpha = step / cfg.warmup_steps
        warm = WARMUP_FACTOR * (1 - alpha) + alpha
    return warm * max(0.0, 1 - step / cfg.poly_steps) ** cfg.poly_power


def batch_tensors(rows: tuple[torch.Tensor, ...], device: torch.device
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 frames (B, H, W, 3) and flow (B, H, W, 2) -> frame (B, 3, H, W) in [0, 1] and flow
    (B, 2, H, W) float32 pixels."""
    frame = rows[0].to(device).permute(0, 3, 1, 2).float() / 255  # (B, 3, H, W)
    flow = rows[1].to(device).float().permute(0, 3, 1, 2).contiguous()  # (B, 2, H, W)
    return frame, flow


class GwmTask(trainloop.Task):
    name, unit, store = "gwm", "pairs", checkpoint

    def __init__(self, cfg: TrainConfig):
        self.config, self.lr = cfg, cfg.lr

    def build(self, device: torch.device) -> MaskNet:
        self.model = MaskNet(self.config.model).to(device).train()
        return self.model

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        """AdamW; no weight decay on the group norms' scales and shifts (official
        WEIGHT_DECAY_NORM 0)."""
        norms = {id(p) for m in model.modules() if isinstance(m, nn.GroupNorm)
                 for p in m.parameters()}
        rest = [p for p in model.parameters() if id(p) not in norms]
        groups = [{"params": rest, "weight_decay": self.config.weight_decay},
                  {"params": [p for p in model.parameters() if id(p) in norms],
                   "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=self.lr)

    def lr_factor(self, step: int, fraction: float) -> float:
        return lr_factor(step, self.config)

    def step(self, loss_fn: nn.Module, rows: tuple[torch.Tensor, ...], gen: torch.Generator,
             ctx: trainloop.StepContext) -> trainloop.loop.Losses:
        cfg = self.config
        frame, flow = batch_tensors(rows, ctx.device)
        masks = loss_fn(frame).masks  # (B, K, H, W): the network sees the frame alone
        terms = gwm_loss(masks, flow, flow_model=cfg.flow_model, ridge=cfg.ridge,
                         flow_clip=cfg.flow_clip, criterion=cfg.criterion, w_rec=cfg.w_rec)
        return terms.total, {t: getattr(terms, t) for t in TERMS}


def fit(config: TrainConfig, frames: np.ndarray, flow: np.ndarray, *, progress: bool = True,
        meta: dict[str, Any] | None = None) -> Path:
    """Train on in-memory pairs: frame 0 (N, H, W, 3) uint8 and its flow 0 -> 1 (N, H, W, 2)
    pixels (any float dtype); resumes from `out/checkpoint.pt`; returns `out/model.pt`."""
    cfg = config
    cfg.validate()
    size = cfg.model.image_size
    if frames.ndim != 4 or frames.shape[1:] != (size, size, 3) or frames.dtype != np.uint8:
        raise GwmError(f"frames must be uint8 (N, {size}, {size}, 3), got "
                       f"{frames.dtype}{list(frames.shape)}")
    if flow.shape != (len(frames), size, size, 2) or not np.issubdtype(flow.dtype, np.floating):
        raise GwmError(f"flow must be floating point (N={len(frames)}, {size}, {size}, 2), got "
                       f"{flow.dtype}{list(flow.shape)}")
    with trainloop.errors_as(GwmError):
        return trainloop.fit(GwmTask(cfg), cfg.loop, (torch.from_numpy(frames),
                                                      torch.from_numpy(flow)),
                             progress=progress, meta=meta)[1]
