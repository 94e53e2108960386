"""Training shared by SCAE and FlowSCAE, through the shared training loop (`trainloop`).

Letters: N training samples, B batch.

The data is one in-memory tensor (N, ...) (images for SCAE, part capsules for FlowSCAE); the
loop visits it in a permutation per (seed, epoch) and hands each step a generator seeded by
(seed, step), so a resumed run continues exactly where it stopped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

import trainloop
from baselines.scae import checkpoint
from baselines.scae.config import SCAEConfig
from baselines.scae.errors import ScaeError
from baselines.scae.model import build
from baselines.scae.optim import build as build_optimizer

CKPT_NAME, MODEL_NAME, LOG_NAME = trainloop.CKPT_NAME, trainloop.MODEL_NAME, trainloop.LOG_NAME


def resolve_device(name: str) -> torch.device:
    return trainloop.resolve_device(name, ScaeError)


def _epsilon(cfg: SCAEConfig) -> float:
    # SCAE's choice: 1e-2 / batch_size^2 (the loss is a sum over the batch's mean)
    return cfg.optim.eps if cfg.optim.eps is not None else 1e-2 / cfg.loop.batch_size ** 2


class ScaeTask(trainloop.Task):
    """SCAE's (or FlowSCAE's) step in the shared loop: the model's own loss of a batch."""

    unit, store = "samples", checkpoint

    def __init__(self, cfg: SCAEConfig):
        self.config, self.name = cfg, cfg.kind

    def build(self, device: torch.device) -> nn.Module:
        self.model = build(self.config).to(device).train()  # its weights drawn from the run's seed
        return self.model

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        o = self.config.optim
        return build_optimizer(model.parameters(), o.name, o.lr, o.decay, o.momentum,
                               _epsilon(self.config))

    def step(self, loss_fn: nn.Module, rows: tuple[torch.Tensor, ...], gen: torch.Generator,
             ctx: trainloop.StepContext) -> trainloop.loop.Losses:
        return self.model.loss(rows[0].to(ctx.device), gen)


def fit(cfg: SCAEConfig, data: torch.Tensor, *, progress: bool = True,
        meta: dict[str, Any] | None = None) -> Path:
    """Train the model `cfg` describes on `data` (N, ...); returns `out/model.pt`."""
    cfg.validate()
    with trainloop.errors_as(ScaeError):
        return trainloop.fit(ScaeTask(cfg), cfg.loop, data, progress=progress,
                             meta=meta)[1]
