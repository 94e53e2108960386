"""Motion Grouping's trainer: the ground-truth flow of each training pair, frame 0 -> 1, is
both input and target; its part of the shared training loop (`trainloop`) is its step and the
official schedule (linear warm-up, then the rate halved and the entropy weight raised every
`decay_steps`).

Letters: N pairs, B batch, K slots, H = W image side.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import trainloop
from baselines.motiongrouping import checkpoint
from baselines.motiongrouping.config import TrainConfig
from baselines.motiongrouping.errors import MotionGroupingError
from baselines.motiongrouping.losses import mg_loss, weight_factor
from baselines.motiongrouping.model import MotionGrouping

CKPT_NAME, MODEL_NAME, LOG_NAME = trainloop.CKPT_NAME, trainloop.MODEL_NAME, trainloop.LOG_NAME
READ_CHUNK = 2048  # pairs converted at a time: the float32 flow is never held whole
TERMS = ("recon", "entropy")


def load_flow(root: str | Path, limit: int | None = None) -> np.ndarray:
    """Flow frame 0 -> 1 of the first `limit` training clips: (N, H, W, 2) float16 pixels.

    float16 (1/64 px steps at 13 px, finer below) halves the memory of a 40k-pair set."""
    from geogen.dataset import open_split  # only needed when reading a dataset
    from geogen.errors import GeogenError
    try:
        part = open_split(root, "train")
        if "flow" not in part.fields:
            raise MotionGroupingError(f"{root} stores no flow; Motion Grouping trains on "
                                      f"ground-truth flow")
        flow = part.read(("flow",), limit, t={"flow": 0}, dtypes={"flow": np.float16},
                         chunk=READ_CHUNK)["flow"]
    except GeogenError as err:  # a bad folder, request or shard: one line for the user
        raise MotionGroupingError(f"cannot read the train split of {root}: {err}") from None
    if not len(flow):
        raise MotionGroupingError(f"{root} has no train pairs")
    return flow


def train(config: TrainConfig, data: str | Path, *, progress: bool = True) -> Path:
    """Train on a geogen dataset root (its train split); returns `out/model.pt`."""
    config.validate()
    flow = load_flow(data, config.max_pairs)
    with trainloop.errors_as(MotionGroupingError):
        meta = trainloop.data_meta(data)  # a resume compares the data's manifest hash too
    return fit(config, flow, progress=progress, meta=meta)


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up over `warmup_steps`, then `decay_rate` per completed `decay_steps`."""
    warm = min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else 1.0
    return warm * cfg.decay_rate ** (step // cfg.decay_steps)


class MotionGroupingTask(trainloop.Task):
    name, unit, store = "motiongrouping", "pairs", checkpoint

    def __init__(self, cfg: TrainConfig):
        self.config, self.lr = cfg, cfg.lr

    def build(self, device: torch.device) -> MotionGrouping:
        self.model = MotionGrouping(self.config.model).to(device).train()
        return self.model

    def lr_factor(self, step: int, fraction: float) -> float:
        return lr_factor(step, self.config)

    def step(self, loss_fn: nn.Module, rows: tuple[torch.Tensor, ...], gen: torch.Generator,
             ctx: trainloop.StepContext) -> trainloop.loop.Losses:
        cfg = self.config
        flow = rows[0].to(ctx.device).float().permute(0, 3, 1, 2).contiguous()  # (B, 2, H, W)
        out = loss_fn(flow, pixels=False)  # the loss is on the network's coding
        w_entropy = cfg.w_entropy * weight_factor(ctx.step, cfg.decay_steps, cfg.weight_growth)
        # Scored in the network's coding of the flow (flow units or the colour coding)
        terms = mg_loss(out.recon, out.target, out.alphas, w_recon=cfg.w_recon,
                        w_entropy=w_entropy, eps=cfg.entropy_eps)
        return terms.total, {t: getattr(terms, t) for t in TERMS}


def fit(config: TrainConfig, flow: np.ndarray, *, progress: bool = True,
        meta: dict[str, Any] | None = None) -> Path:
    """Train on in-memory flows (N, H, W, 2), pixels frame 0 -> 1 (any float dtype); resumes
    from `out/checkpoint.pt`; returns `out/model.pt`."""
    cfg = config
    cfg.validate()
    size = cfg.model.image_size
    if flow.ndim != 4 or flow.shape[1:] != (size, size, 2):
        raise MotionGroupingError(f"flow must be (N, {size}, {size}, 2), got {list(flow.shape)}")
    if not np.issubdtype(flow.dtype, np.floating):
        raise MotionGroupingError(f"flow must be floating point, got {flow.dtype}")
    with trainloop.errors_as(MotionGroupingError):
        return trainloop.fit(MotionGroupingTask(cfg), cfg.loop, (torch.from_numpy(flow),),
                             progress=progress, meta=meta)[1]
