"""Test-time pose refinement: fit each image's capsule poses to the image itself.

Letters: B batch, K capsules, P band pixels, H, W image side.

The encoder regresses poses in one pass, and its pose errors are most of what a trained
model's amodal IoU loses (`flowbench diagnose --probe oracle` measures it). Refinement recovers
much of that without any label: it descends the layered flat-colour appearance loss of the
image (the trainer's `w_appearance` term) in the poses alone. Its background layer is one flat
colour, or, given the pair's other frame, that frame's pixels (the trainer's
`appearance_background="still"`): a static photograph then explains itself, where a flat
colour would pull capsules onto it. A textured image is all band; each step then fits a fresh
draw of `points` band pixels. See config.RefineConfig; the measurements are in
docs/results/flowcaps.md, "Test-time pose refinement".
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from flowcaps import geometry
from flowcaps.config import RefineConfig
from flowcaps.errors import FlowcapsError
from flowcaps.inputs import as_images
from flowcaps.losses import appearance_loss
from flowcaps.model import Capsules, FlowCapsules


def edge_band(images: torch.Tensor, radius: int) -> torch.Tensor:
    """images (B, 3, H, W) -> (B, H*W) bool: pixels within `radius` px of an intensity change.

    A flat region's local range is 0; 1/255 is one step of the uint8 frames the images come from.
    """
    k = 2 * radius + 1
    spread = F.max_pool2d(images, k, 1, radius) + F.max_pool2d(-images, k, 1, radius)  # (B, 3, H, W)
    return spread.amax(1).flatten(1) > 0.5 / 255  # (B, H*W)


def refine_poses(model: FlowCapsules, images: torch.Tensor, shape: torch.Tensor, pose: torch.Tensor,
                 depth: torch.Tensor, cfg: RefineConfig,
                 still: torch.Tensor | None = None) -> torch.Tensor:
    """-> pose (B, K, 4) fitted to `images` (B, 3, H, W) from the start `pose`; see the module.

    still: the pair's other frames (B, 3, H, W), whose pixels are the background layer; None:
    a flat-colour background.
    """
    cfg.validate()
    if still is not None and still.shape != images.shape:
        raise FlowcapsError(f"still frames {tuple(still.shape)} do not match the images "
                            f"{tuple(images.shape)}")
    if cfg.steps == 0:
        return pose
    b, _, h, w = images.shape
    band = edge_band(images, cfg.band)  # (B, H*W)
    if still is not None:  # and where the frames differ: the background layer fits there no more
        band = band | ((images - still).abs().amax(1).flatten(1) > 0.5 / 255)  # (B, H*W)
    # Band pixels first in each row; rows are padded to the longest band with weight 0.
    p = max(int(band.sum(1).max()), 1)
    order = torch.sort(band.float(), dim=1, descending=True, stable=True).indices[:, :p]  # (B, P)
    weight = band.gather(1, order).float()  # (B, P)
    u = geometry.pixel_centres(h, w, images.device)[order]  # (B, P, 2)
    target = images.flatten(2).gather(2, order[:, None].expand(-1, 3, -1)).float()  # (B, 3, P)
    behind = (None if still is None else
              still.flatten(2).gather(2, order[:, None].expand(-1, 3, -1)).float())  # (B, 3, P)
    draw = cfg.points and p > cfg.points  # else every band pixel, every step
    gen = torch.Generator(images.device).manual_seed(cfg.seed) if draw else None
    scale_min = model.config.scale_min
    with torch.enable_grad():
        x = pose.detach().clone().requires_grad_(True)  # (B, K, 4)
        opt = torch.optim.Adam([x], lr=cfg.lr)
        for step in range(cfg.steps):
            for group in opt.param_groups:
                group["lr"] = cfg.lr * 0.5 * (1 + math.cos(math.pi * step / cfg.steps))
            su, st, sw, sb = u, target, weight, behind
            if draw:  # a uniform draw of each row's band pixels (all of a row's if fewer)
                keys = torch.rand(weight.shape, generator=gen, device=images.device) + weight  # (B, P)
                pick = keys.topk(cfg.points, dim=1).indices  # (B, points)
                su, sw = u.gather(1, pick[..., None].expand(-1, -1, 2)), weight.gather(1, pick)
                st = target.gather(2, pick[:, None].expand(-1, 3, -1))  # (B, 3, points)
                sb = None if behind is None else behind.gather(2, pick[:, None].expand(-1, 3, -1))
            pm = model.masks_at(shape.detach(), x, depth.detach(), su)
            # Each image's loss only reaches its own poses, and Adam is invariant to the batch
            # mean's 1/B (up to its epsilon), so a batch refines its images independently.
            loss = appearance_loss(pm.visible, st, sw, sb)
            (grad,) = torch.autograd.grad(loss, x)
            x.grad = grad
            opt.step()
            with torch.no_grad():
                x[..., 3].clamp_(min=scale_min)  # the encoder's floor on the scale
    return x.detach()


@torch.no_grad()
def parse_refined(model: FlowCapsules, images: torch.Tensor, cfg: RefineConfig,
                  still: torch.Tensor | None = None) -> Capsules:
    """`model.parse(images)` with the poses refined first (same fields, shapes and inputs);
    `still`, the pair's other frames in the same form, makes them the background layer."""
    size, device = model.config.image_size, model.encoder.head.weight.device
    images = as_images(images, size, device)
    if still is not None:
        still = as_images(still, size, device)
    b, _, h, w = images.shape
    shape, pose, depth = model.encode(images)
    pose = refine_poses(model, images, shape, pose, depth, cfg, still)
    u = geometry.pixel_centres(h, w, images.device).expand(b, -1, -1)  # (B, H*W, 2)
    pm = model.masks_at(shape, pose, depth, u)
    k = model.config.num_capsules
    return Capsules(shape=shape, pose=pose, depth=depth,
                    masks=pm.masks.view(b, k, h, w), visible=pm.visible.view(b, k, h, w))
