"""Motion Grouping's training objective on frame pairs: flow reconstruction and the entropy of
each pixel's alphas (which pushes every pixel to one slot).

The official third term, temporal consistency, compares the alphas of one frame computed from
two of its flows (gaps 1, 2, -1, -2); a pair gives frame 0 one flow, so it does not apply here
(docs/baselines/motiongrouping.md).

Letters: B batch, K slots, H = W image side, C channels of the network's coding of the flow
(`Outputs.recon` and `Outputs.target`: two components in the flow unit, or the colour coding).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass
class LossTerms:
    total: torch.Tensor
    recon: torch.Tensor
    entropy: torch.Tensor

    def floats(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name).detach()) for f in fields(self)}


def recon_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over batch, channels and pixels: (B, C, H, W) each, in the
    coding's units squared."""
    return ((pred - target) ** 2).mean()


def entropy_loss(alphas: torch.Tensor, eps: float) -> torch.Tensor:
    """-sum_k a_k log(a_k + eps), averaged over batch and pixels: alphas (B, K, H, W). Zero
    where one slot owns the pixel, log K where all share it equally."""
    return -(alphas * torch.log(alphas + eps)).sum(1).mean()


def weight_factor(step: int, decay_steps: int, growth: float) -> float:
    """The entropy weight's multiplier at `step`: `growth` per completed decay period (the
    official raises it with each halving of the learning rate)."""
    return growth ** (step // decay_steps)


def mg_loss(flow_pred: torch.Tensor, flow_target: torch.Tensor, alphas: torch.Tensor, *,
            w_recon: float, w_entropy: float, eps: float) -> LossTerms:
    recon = recon_loss(flow_pred, flow_target)
    entropy = entropy_loss(alphas, eps)
    return LossTerms(total=w_recon * recon + w_entropy * entropy, recon=recon, entropy=entropy)
