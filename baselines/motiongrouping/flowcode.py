"""The flow coding the official trains on (its README's `train.py --flow_to_rgb`): each flow
image as the Middlebury colour wheel draws it, scaled to [-1, 1].

The official reads RAFT flow, resizes it to the network's side and passes it through
`cvbase.optflow.flow2rgb`, then maps (rgb - 0.5) x 2. That coding, written here from its
description: every image's flow is divided by its own largest speed (so the fastest pixel is
fully saturated, whatever its speed in pixels); the direction picks a hue on the 55-bin
Middlebury wheel (interpolated between bins, rightward red); the relative speed r in [0, 1]
fades the hue towards white, 1 - r (1 - hue). Zero flow is white, (1, 1, 1) after scaling.

Letters: B batch, H x W image, 2 flow components in pixels.
"""
from __future__ import annotations

import math

import torch

# Bins per transition of the Middlebury wheel: red-yellow, yellow-green, green-cyan,
# cyan-blue, blue-magenta, magenta-red (Baker et al.'s colour code; cvbase's default).
WHEEL_BINS = (15, 6, 4, 11, 13, 6)
CHANNELS = 3


def colour_wheel() -> torch.Tensor:
    """(55, 3) the wheel's colours in [0, 1], red at bin 0, going through yellow, green, cyan,
    blue and magenta back towards red."""
    ry, yg, gc, cb, bm, mr = WHEEL_BINS
    up = lambda n: torch.arange(n, dtype=torch.float32) / n  # noqa: E731  (0 .. (n-1)/n)
    one, zero = torch.ones, torch.zeros
    parts = [
        torch.stack([one(ry), up(ry), zero(ry)], 1),  # red -> yellow: green rises
        torch.stack([1 - up(yg), one(yg), zero(yg)], 1),  # yellow -> green: red falls
        torch.stack([zero(gc), one(gc), up(gc)], 1),  # green -> cyan: blue rises
        torch.stack([zero(cb), 1 - up(cb), one(cb)], 1),  # cyan -> blue: green falls
        torch.stack([up(bm), zero(bm), one(bm)], 1),  # blue -> magenta: red rises
        torch.stack([one(mr), zero(mr), 1 - up(mr)], 1),  # magenta -> red: blue falls
    ]
    return torch.cat(parts, 0)  # (55, 3)


_WHEEL = colour_wheel()


def flow_to_rgb(flow: torch.Tensor) -> torch.Tensor:
    """flow (B, 2, H, W) pixels -> (B, 3, H, W) the official's coding in [-1, 1]."""
    flow = flow.float()
    dx, dy = flow[:, 0], flow[:, 1]  # (B, H, W) each
    speed = torch.hypot(dx, dy)  # (B, H, W)
    top = speed.flatten(1).amax(-1)  # (B,)
    # An image without motion is left as it is (all white), as the official's guard does.
    top = torch.where(top > 0, top, torch.ones_like(top))[:, None, None]  # (B, 1, 1)
    r = (speed / top).clamp(max=1.0)  # (B, H, W); the division can overshoot 1 by rounding
    # -dy with dy = 0 is -0.0, so rightward flow gives atan2(-0, -dx) = -pi: bin 0, red.
    angle = torch.atan2(-dy / top, -dx / top) / math.pi  # (B, H, W) in [-1, 1]
    wheel = _WHEEL.to(flow.device)
    n = wheel.shape[0]
    pos = (angle + 1) / 2 * (n - 1)  # (B, H, W) in [0, n - 1]
    left = pos.floor().long().clamp(0, n - 1)
    frac = (pos - left.float())[..., None]  # (B, H, W, 1)
    hue = (1 - frac) * wheel[left] + frac * wheel[(left + 1) % n]  # (B, H, W, 3)
    rgb = 1 - r[..., None] * (1 - hue)  # (B, H, W, 3): white at rest, the hue at top speed
    return ((rgb - 0.5) * 2).clamp(-1.0, 1.0).permute(0, 3, 1, 2).contiguous()  # (B, 3, H, W)
