"""R-NEM's training loss for a Gaussian pixel likelihood (paper, Eq. 3; official code's
compute_outer_loss).

Letters: B batch, K groups, C channels, H, W the model's work side.

Per pixel i and group k, with gamma fixed (no gradient flows into the E-step):
  L = sum_{i,k} gamma_ik * -log N(x_i; mu_ik, sigma^2)
      + (1 - gamma_ik) * KL( N(prior, sigma^2) || N(mu_ik, sigma^2) )
The first term is the usual EM objective; the second pulls each group's prediction towards the
prior outside its share, so a group explains only its own object. With one sigma for both
Gaussians the KL is (mu - prior)^2 / (2 sigma^2). The sum runs over pixels, channels and groups
and is averaged over the batch (the official code's reduction); the trainer averages the steps.
The -log N term drops its constant log(sigma sqrt(2 pi)), which has no gradient.
"""
from __future__ import annotations

from typing import NamedTuple

import torch


class LossTerms(NamedTuple):
    total: torch.Tensor  # intra + inter
    intra: torch.Tensor  # the gamma-weighted negative log-likelihood
    inter: torch.Tensor  # the KL-to-prior term outside each group's share


def rnem_loss(mu: torch.Tensor, gamma: torch.Tensor, target: torch.Tensor, sigma: float,
              prior_mean: float | torch.Tensor) -> LossTerms:
    """One step's loss.

    Args:
        mu: (B, K, C, H, W) predicted means.
        gamma: (B, K, 1, H, W) responsibilities (detached here).
        target: (B, C, H, W) the step's target frame.
        prior_mean: a number, or (B, 1, C, 1, 1) a prior per sample.
    """
    g = gamma.detach()  # (B, K, 1, H, W)
    scale = 1.0 / (2 * sigma ** 2)
    nll = scale * (mu - target[:, None]) ** 2  # (B, K, C, H, W)
    kl = scale * (mu - prior_mean) ** 2  # (B, K, C, H, W)
    b = mu.shape[0]
    intra = (g * nll).sum() / b
    inter = ((1 - g) * kl).sum() / b
    return LossTerms(intra + inter, intra, inter)
