"""The flow coding the official trains on (its README's `train.py --flow_to_rgb`): each flow
image as the Middlebury colour wheel draws it, scaled to [-1, 1].

The official reads RAFT flow, resizes it to the network's side and passes it through
`cvbase.optflow.flow2rgb`, then maps (rgb - 0.5) x 2. That coding, written here from its
description: every image's flow is divided by its own largest speed (so the fastest pixel is
fully saturated, whatever its speed in pixels); the direction picks a hue on the 55-bin
Middlebury wheel (interpolated between bins, rightward red); the relative speed r in [0, 1]
fades the hue towards white, 1 - r (1 - hue). Zero flow is white, (1, 1, 1) after scaling.
`geogen.flowviz` draws flow for figures on another wheel (HSV, a scale shared by a figure), so
it is not this coding.

Letters: B batch, H x W image, 2 flow components in pixels.
"""
from __future__ import annotations

import math

import torch

# Bins per transition of the Middlebury wheel: red-yellow, yellow-green, green-cyan,
# cyan-blue, blue-magenta, magenta-red (Baker et al.'s colour code; cvbase's default).
WHEEL_BINS = (15, 6, 4, 11, 13, 6)


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
    top = speed.flatten(1).amax(-1)  # (B,), as top_speed
    # An image without motion is left as it is (all white), as the official's guard does.
    top = torch.where(top > 0, top, torch.ones_like(top))[:, None, None]  # (B, 1, 1)
    r = (speed / top).clamp(max=1.0)  # (B, H, W); the division can overshoot 1 by rounding
    # -dy with dy = 0 is -0.0, so rightward flow gives atan2(-0, -dx) = -pi: bin 0, red.
    angle = torch.atan2(-dy, -dx) / math.pi  # (B, H, W) in [-1, 1]
    wheel = _WHEEL.to(flow.device)
    n = wheel.shape[0]
    pos = (angle + 1) / 2 * (n - 1)  # (B, H, W) in [0, n - 1]
    left = pos.floor().long().clamp(0, n - 1)
    frac = (pos - left.float())[..., None]  # (B, H, W, 1)
    hue = (1 - frac) * wheel[left] + frac * wheel[(left + 1) % n]  # (B, H, W, 3)
    rgb = 1 - r[..., None] * (1 - hue)  # (B, H, W, 3): white at rest, the hue at top speed
    return ((rgb - 0.5) * 2).clamp(-1.0, 1.0).permute(0, 3, 1, 2).contiguous()  # (B, 3, H, W)


# The wheel's six transitions as (channel at 1, channel at 0, varying channel, rising?), with
# the first bin of each: the position along the wheel follows from which channel is largest,
# which smallest, and where the third lies between them.
_SEGMENTS = ((0, 2, 1, True), (1, 2, 0, False), (1, 0, 2, True),
             (2, 0, 1, False), (2, 1, 0, True), (0, 1, 2, False))
_STARTS = tuple(sum(WHEEL_BINS[:i]) for i in range(len(WHEEL_BINS)))


def rgb_to_flow(rgb: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """The inverse of `flow_to_rgb` given each image's top speed: rgb (B, 3, H, W) in [-1, 1],
    top (B,) pixels -> flow (B, 2, H, W) pixels. Exact on codings; on a reconstruction the
    speed is read as the spread of its channels (largest minus smallest, 1 at full hue) and the
    direction from where the middle channel lies between the other two."""
    c = (rgb.float().clamp(-1.0, 1.0) + 1) / 2  # (B, 3, H, W) in [0, 1]
    hi, lo = c.amax(1), c.amin(1)  # (B, H, W) each
    r = hi - lo  # (B, H, W): 1 - r fades every channel towards white equally
    hi_ch, lo_ch = c.argmax(1), c.argmin(1)  # (B, H, W) each
    pos = torch.zeros_like(r)
    for (top_ch, low_ch, mid_ch, rising), start, bins in zip(_SEGMENTS, _STARTS, WHEEL_BINS):
        here = (hi_ch == top_ch) & (lo_ch == low_ch)  # (B, H, W)
        t = (c[:, mid_ch] - lo) / r.clamp_min(1e-6)  # (B, H, W) in [0, 1]
        pos = torch.where(here, start + bins * (t if rising else 1 - t), pos)
    # The coding's positions run from 0 to n - 1 (angle -1 to 1, both rightward); red read as
    # the magenta-red transition's end (tied channels) is that same direction.
    pos = pos.clamp(max=_WHEEL.shape[0] - 1)
    angle = pos / (_WHEEL.shape[0] - 1) * 2 - 1  # (B, H, W): atan2(-dy, -dx) / pi
    speed = r * top.float()[:, None, None]  # (B, H, W) pixels
    dx = -speed * torch.cos(math.pi * angle)
    dy = -speed * torch.sin(math.pi * angle)
    return torch.stack([dx, dy], 1)  # (B, 2, H, W)


def top_speed(flow: torch.Tensor) -> torch.Tensor:
    """flow (B, 2, H, W) pixels -> (B,) each image's largest speed, the scale of its coding."""
    return torch.hypot(flow[:, 0].float(), flow[:, 1].float()).flatten(1).amax(-1)
