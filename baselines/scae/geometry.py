"""Affine poses and template rendering: every coordinate convention of the SCAE package.

Letters: N templates (or batch x parts), C channels, T template side, H, W image side.

Frames: image and template coordinates are (x, y) in [-1, 1], x along columns, y along rows,
-1 the outer edge of pixel 0 (torch `affine_grid`/`grid_sample` with align_corners=False, the
frame of flowcaps.geometry). A pose is the 2x3 matrix [A | t] that takes a template point v to
the image point u = A v + t; as a 6-vector it is that matrix row-major
(a11, a12, tx, a21, a22, ty), the layout the object capsules vote in.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def geometric_transform(raw: torch.Tensor) -> torch.Tensor:
    """SCAE's pose nonlinearity: 6 free numbers -> an affine (..., 2, 3).

    raw = (scale_x, scale_y, angle, shear, tx, ty) before squashing: scales sigmoid + 0.01
    (a template at most about the image's size), shear and translation tanh(5 x), angle 2 pi x.
    A = [[sx cos + sh sy sin, -sx sin + sh sy cos], [sy sin, sy cos]], so det A = sx sy > 0.
    """
    sx, sy, angle, shear, tx, ty = raw.unbind(-1)  # (...,) each
    sx, sy = torch.sigmoid(sx) + 1e-2, torch.sigmoid(sy) + 1e-2
    shear, tx, ty = torch.tanh(5 * shear), torch.tanh(5 * tx), torch.tanh(5 * ty)
    angle = 2 * math.pi * angle
    c, s = torch.cos(angle), torch.sin(angle)
    row0 = torch.stack([sx * c + shear * sy * s, -sx * s + shear * sy * c, tx], -1)  # (..., 3)
    row1 = torch.stack([sy * s, sy * c, ty], -1)  # (..., 3)
    return torch.stack([row0, row1], -2)  # (..., 2, 3)


def similarity(tx: torch.Tensor, ty: torch.Tensor, angle: torch.Tensor,
               scale: torch.Tensor) -> torch.Tensor:
    """The affine of u = scale R(angle) v + t (FlowCapsules' pose), (..., 2, 3)."""
    c, s = torch.cos(angle), torch.sin(angle)
    row0 = torch.stack([scale * c, -scale * s, tx], -1)  # (..., 3)
    row1 = torch.stack([scale * s, scale * c, ty], -1)  # (..., 3)
    return torch.stack([row0, row1], -2)  # (..., 2, 3)


def invert(affine: torch.Tensor) -> torch.Tensor:
    """[A | t] -> [A^-1 | -A^-1 t], (..., 2, 3); A must be invertible."""
    a, b = affine[..., 0, 0], affine[..., 0, 1]
    c, d = affine[..., 1, 0], affine[..., 1, 1]
    det = a * d - b * c  # (...,)
    adj = torch.stack([torch.stack([d, -b], -1), torch.stack([-c, a], -1)], -2)  # (..., 2, 2)
    inv = adj / det[..., None, None]
    shift = -(inv @ affine[..., :, 2:])  # (..., 2, 1)
    return torch.cat([inv, shift], -1)  # (..., 2, 3)


def compose(outer: torch.Tensor, inner: torch.Tensor) -> torch.Tensor:
    """The affine of outer(inner(v)), (..., 2, 3)."""
    a = outer[..., :, :2] @ inner[..., :, :2]  # (..., 2, 2)
    t = outer[..., :, :2] @ inner[..., :, 2:] + outer[..., :, 2:]  # (..., 2, 1)
    return torch.cat([a, t], -1)


def render(templates: torch.Tensor, pose: torch.Tensor, size: int) -> torch.Tensor:
    """Each template placed in a size x size image by its pose (bilinear; zero outside).

    templates (N, C, T, T), pose (N, 2, 3) template -> image; returns (N, C, size, size).
    The image pixel at u samples the template at A^-1 (u - t).
    """
    n, ch = templates.shape[:2]
    grid = F.affine_grid(invert(pose), [n, ch, size, size], align_corners=False)  # (N, H, W, 2)
    return F.grid_sample(templates, grid, mode="bilinear", padding_mode="zeros",
                         align_corners=False)  # (N, C, H, W)
