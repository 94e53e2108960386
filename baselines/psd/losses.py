"""PSD's training objective: flow reconstruction, KL to the N(0, I) prior, frame-1 prediction,
and in stage 2 the structure's sparsity and the local motions' sparsity.

Letters: B batch, D latent dimensions, H = W image side, 2 flow components. Flow terms are in
PSD's units (percent of the image side).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from baselines.psd.config import TrainConfig
from baselines.psd.model import PSD, Outputs


@dataclass
class LossTerms:
    total: torch.Tensor
    flow: torch.Tensor
    kl: torch.Tensor
    structure: torch.Tensor
    local: torch.Tensor
    image: torch.Tensor

    def floats(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name).detach()) for f in fields(self)}


def kl_per_dim(mean: torch.Tensor, log_var: torch.Tensor) -> torch.Tensor:
    """KL(N(mean, exp(log_var)) || N(0, 1)) per sample and dimension, nats: (B, D)."""
    return 0.5 * (mean ** 2 + torch.exp(log_var) - 1.0 - log_var)


def kl_loss(mean: torch.Tensor, log_var: torch.Tensor) -> torch.Tensor:
    """Summed over dimensions, averaged over the batch."""
    return kl_per_dim(mean, log_var).sum(1).mean()


def flow_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over batch, components and pixels: (B, 2, H, W) each."""
    return ((pred - target) ** 2).mean()


def structure_l1(weights: torch.Tensor) -> torch.Tensor:
    """L1 of the (non-negative) parent-child weights (D, D)."""
    return weights.abs().sum()


def local_l1(local: torch.Tensor) -> torch.Tensor:
    """L1 of the local motion maps (B, 2, D, H, W): summed over components and dimensions,
    averaged over batch and pixels. With the structure on, a parent need not repeat its motion
    over its children's regions; this term makes it stop doing so."""
    return local.abs().sum((1, 2)).mean()


def image_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((pred - target) ** 2).mean()


def psd_loss(model: PSD, out: Outputs, flow_target: torch.Tensor, frame1: torch.Tensor,
             cfg: TrainConfig, kl_factor: float = 1.0) -> LossTerms:
    """All terms for one batch. flow_target (B, 2, H, W) in percent of the side; frame1
    (B, 3, H, W); `kl_factor` scales the KL weight (the warm-up's `trainloop.ramp`). The KL is
    constant in stage 2 (the encoder is detached) and is still logged."""
    zero = out.flow.new_zeros(())
    flow = flow_loss(out.flow, flow_target)
    kl = kl_loss(out.mean, out.log_var)
    image = image_loss(out.image, frame1)
    structure, local = zero, zero
    if model.stage2:
        structure = structure_l1(model.structure.weights(model.active))
        local = local_l1(out.local)
    total = (cfg.w_flow * flow + cfg.w_kl * kl_factor * kl + cfg.w_image * image
             + cfg.w_structure * structure + cfg.w_local * local)
    return LossTerms(total=total, flow=flow, kl=kl, structure=structure, local=local, image=image)
