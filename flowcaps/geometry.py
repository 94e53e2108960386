"""Coordinates, conformal poses, flow units, warping and blurring: every sign convention lives here.

Letters: B batch, K capsules, P sampled points, H, W image side.

Image frame: u in [-1, 1]^2 with u = (x, y), x along columns, y along rows; -1 is the outer
edge of pixel 0 (torch `grid_sample(..., align_corners=False)`), so pixel column i has its centre
at (2 i + 1) / W - 1. A displacement of du in this frame is du * W / 2 pixels.

Pose theta = (tx, ty, a, s): P_theta v = s R(a) v + t maps canonical v to image u, with
R(a) = [[cos a, -sin a], [sin a, cos a]] (in (x, y) with y down, positive a turns clockwise on
screen, as in geogen's schema).

Flow (paper Eq. 5, in the consistent form): masks live on frame I's grid and
Phi(u) = sum_k Lambda+_k(u) (T_k(u) - u), T_k = P_theta'_k o P_theta_k^-1, so the point seen at u
in I is at u + Phi(u) in I'; I is reconstructed by sampling I' at u + Phi(u) (backward warp).
This is geogen's forward `flow` convention once converted to pixels.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def pixel_centres(h: int, w: int, device: torch.device | None = None) -> torch.Tensor:
    """The (x, y) image-frame coordinates of every pixel centre, row-major: (H*W, 2)."""
    xs = (2 * torch.arange(w, device=device, dtype=torch.float32) + 1) / w - 1  # (W,)
    ys = (2 * torch.arange(h, device=device, dtype=torch.float32) + 1) / h - 1  # (H,)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")  # (H, W) each
    return torch.stack([gx.reshape(-1), gy.reshape(-1)], dim=-1)  # (H*W, 2)


def index_to_coords(idx: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Row-major pixel indices (B, P) -> image-frame centres (B, P, 2)."""
    col = (idx % w).float()
    row = torch.div(idx, w, rounding_mode="floor").float()
    return torch.stack([(2 * col + 1) / w - 1, (2 * row + 1) / h - 1], dim=-1)  # (B, P, 2)


def to_canonical(pose: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """v = P_theta^-1 u = R(-a) (u - t) / s for every capsule and point.

    pose (B, K, 4); u (B, P, 2) -> v (B, K, P, 2).
    """
    t = pose[..., None, 0:2]  # (B, K, 1, 2)
    cos, sin = pose[..., 2].cos()[..., None], pose[..., 2].sin()[..., None]  # (B, K, 1)
    scale = pose[..., 3][..., None]  # (B, K, 1)
    d = u[:, None] - t  # (B, K, P, 2)
    vx = (cos * d[..., 0] + sin * d[..., 1]) / scale  # (B, K, P)
    vy = (-sin * d[..., 0] + cos * d[..., 1]) / scale  # (B, K, P)
    return torch.stack([vx, vy], dim=-1)  # (B, K, P, 2)


def from_canonical(pose: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """u = P_theta v = s R(a) v + t. pose (B, K, 4); v (B, K, P, 2) -> u (B, K, P, 2)."""
    cos, sin = pose[..., 2].cos()[..., None], pose[..., 2].sin()[..., None]  # (B, K, 1)
    scale = pose[..., 3][..., None]  # (B, K, 1)
    ux = scale * (cos * v[..., 0] - sin * v[..., 1]) + pose[..., None, 0]  # (B, K, P)
    uy = scale * (sin * v[..., 0] + cos * v[..., 1]) + pose[..., None, 1]  # (B, K, P)
    return torch.stack([ux, uy], dim=-1)  # (B, K, P, 2)


def capsule_flow(v: torch.Tensor, pose_next: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """T_k(u) - u with T_k = P_theta'_k P_theta_k^-1, given v = P_theta_k^-1 u.

    v (B, K, P, 2); pose_next (B, K, 4); u (B, P, 2) -> (B, K, P, 2) in the image frame.
    """
    return from_canonical(pose_next, v) - u[:, None]  # (B, K, P, 2)


def frame_to_pixels(flow: torch.Tensor, h: int, w: int, dim: int = -1) -> torch.Tensor:
    """Image-frame displacements (dx, dy) along `dim` -> pixels."""
    scale = torch.tensor([w / 2, h / 2], dtype=flow.dtype, device=flow.device)
    shape = [1] * flow.dim()
    shape[dim] = 2
    return flow * scale.view(shape)


def sample_at(images: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Bilinear samples of images (B, C, H, W) at image-frame points u (B, P, 2) -> (B, C, P).

    Points outside the image take the border value (a flat background continues outward).
    """
    grid = u[:, None].to(images.dtype)  # (B, 1, P, 2)
    out = F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out[:, :, 0]  # (B, C, P)


def gather_pixels(images: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Exact pixel values at row-major indices: images (B, C, H, W), idx (B, P) -> (B, C, P)."""
    b, c = images.shape[:2]
    flat = images.reshape(b, c, -1)  # (B, C, H*W)
    return flat.gather(2, idx[:, None].expand(b, c, idx.shape[1]))  # (B, C, P)


def gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur with edge replication; sigma in pixels, 0 returns the input."""
    if sigma <= 0:
        return images
    radius = max(1, int(math.ceil(3 * sigma)))
    x = torch.arange(-radius, radius + 1, dtype=images.dtype, device=images.device)
    k = torch.exp(-0.5 * (x / sigma) ** 2)
    k = k / k.sum()  # (R,)
    c = images.shape[1]
    padded = F.pad(images, (radius, radius, 0, 0), mode="replicate")
    out = F.conv2d(padded, k.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    padded = F.pad(out, (0, 0, radius, radius), mode="replicate")
    return F.conv2d(padded, k.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)  # (B, C, H, W)
