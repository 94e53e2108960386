"""Guess What Moves' training objective: each soft mask should hold a region whose flow one
simple parametric motion explains.

For each mask k, the parameters theta_k (P, 2) of a flow model in pixel coordinates are fitted
to the flow in closed form, by least squares weighted by the mask:

    theta_k = argmin_theta  sum_n m_kn^2 |a_n theta - f_n|^2   (+ ridge |theta|^2)
            = (A^T W_k A / N + ridge I)^-1 A^T W_k F / N,     W_k = diag(m_k^2)

where a_n is pixel n's row of the design matrix A (N, P) and f_n its flow (dx, dy). The
official scales A's rows and the flow by the mask before a QR solve, which is these weights
m^2; its ridge argument is unused (docs/baselines/gwm.md). The rows are
    affine:    a = (x, y, 1)                      P = 3
    quadratic: a = (x, y, x^2, y^2, x y, 1)       P = 6  (the official `get_quad_flow`)
The flow is then reconstructed as the mask-weighted mixture of the fitted flows,
    f_hat_n = sum_k m_kn (a_n theta_k),
and the loss is the mean squared (or absolute) error between f_hat and the flow. Gradients reach
the masks both through the mixture and through the fit.

Coordinates: pixel centres mapped to [-1, 1] (x along the width, y along the height). The
official's grid is [0, 1); a polynomial model of degree <= 2 spans the same flows under any
affine change of coordinates, so only the conditioning (and the tiny ridge) differ.

Letters: B batch, K masks, N = H W pixels, P parameters per flow component.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

PARAMS = {"affine": 3, "quadratic": 6}


def design(h: int, w: int, flow_model: str, device: torch.device | str = "cpu",
           dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The design matrix (N, P): each pixel's row of the flow model's basis, rows in
    row-major pixel order (as `flatten(-2)` of an (H, W) map)."""
    ys = (torch.arange(h, device=device, dtype=dtype) * 2 + 1) / h - 1  # (H,)
    xs = (torch.arange(w, device=device, dtype=dtype) * 2 + 1) / w - 1  # (W,)
    y, x = torch.meshgrid(ys, xs, indexing="ij")  # (H, W) each
    x, y = x.flatten(), y.flatten()  # (N,)
    one = torch.ones_like(x)
    if flow_model == "affine":
        cols = (x, y, one)
    elif flow_model == "quadratic":
        cols = (x, y, x * x, y * y, x * y, one)
    else:
        raise ValueError(f"unknown flow model {flow_model!r}; known: {', '.join(PARAMS)}")
    return torch.stack(cols, 1)  # (N, P)


def fit_flow(masks: torch.Tensor, flow: torch.Tensor, basis: torch.Tensor,
             ridge: float) -> torch.Tensor:
    """Each mask's weighted least-squares flow parameters.

    masks (B, K, H, W) in [0, 1], flow (B, 2, H, W) pixels, basis (N, P) -> theta (B, K, P, 2),
    in basis' dtype (float64 by default: the normal equations of the quadratic model are
    ill-conditioned for small regions)."""
    b, k = masks.shape[:2]
    n, p = basis.shape
    wgt = masks.flatten(2).to(basis.dtype) ** 2  # (B, K, N)
    f = flow.flatten(2).to(basis.dtype)  # (B, 2, N)
    outer = (basis[:, :, None] * basis[:, None, :]).reshape(n, p * p)  # (N, P P)
    gram = (wgt @ outer).view(b, k, p, p) / n  # (B, K, P, P): A^T W A / N
    rhs = (wgt[:, :, None, :] * f[:, None]) @ basis / n  # (B, K, 2, P): (A^T W F)^T / N
    eye = torch.eye(p, device=basis.device, dtype=basis.dtype)
    return torch.linalg.solve(gram + ridge * eye, rhs.transpose(-1, -2))  # (B, K, P, 2)


def mask_flows(theta: torch.Tensor, basis: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """theta (B, K, P, 2), basis (N, P) -> each mask's fitted flow field (B, K, 2, H, W)."""
    fields = torch.einsum("np,bkpc->bkcn", basis, theta)  # (B, K, 2, N)
    return fields.unflatten(-1, (h, w))


def reconstruct(masks: torch.Tensor, flow: torch.Tensor, flow_model: str,
                ridge: float) -> torch.Tensor:
    """The mask-weighted mixture of each mask's fitted flow: (B, 2, H, W) in flow's dtype."""
    h, w = flow.shape[-2:]
    basis = design(h, w, flow_model, flow.device)  # (N, P)
    theta = fit_flow(masks, flow, basis, ridge)  # (B, K, P, 2)
    fields = mask_flows(theta, basis, h, w).to(flow.dtype)  # (B, K, 2, H, W)
    return (masks[:, :, None] * fields).sum(1)  # (B, 2, H, W)


@dataclass
class LossTerms:
    total: torch.Tensor
    rec: torch.Tensor  # the flow error (mean squared px^2, or mean absolute px), unweighted


def gwm_loss(masks: torch.Tensor, flow: torch.Tensor, *, flow_model: str, ridge: float,
             flow_clip: float, criterion: str, w_rec: float) -> LossTerms:
    """masks (B, K, H, W) softmax over K, flow (B, 2, H, W) pixels -> the weighted loss.

    The flow is clipped to +-flow_clip px first (official: +-20), so a few wild vectors cannot
    dominate a squared error."""
    target = flow.clamp(-flow_clip, flow_clip)  # (B, 2, H, W)
    recon = reconstruct(masks, target, flow_model, ridge)  # (B, 2, H, W)
    err = F.mse_loss(recon, target) if criterion == "l2" else F.l1_loss(recon, target)
    return LossTerms(total=w_rec * err, rec=err)
