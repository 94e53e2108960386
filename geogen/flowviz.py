"""The project's one flow colour wheel (Middlebury style) and its key.

Zero flow is white; the hue gives the direction and the saturation the length, full at
`max_mag` pixels. Directions are those of the image (geogen.schema): +x right, +y down, so
in the key the colour at a point is that of flow pointing from the key's centre to it.

Letters: H, W image side.
"""
from __future__ import annotations

import numpy as np
from skimage.color import hsv2rgb

KEY_EDGE = 215  # grey outside the key's disc, where the lengths pass max_mag


def flow_to_rgb(flow: np.ndarray, max_mag: float, axis: int = -1) -> np.ndarray:
    """Flow in pixels with (dx, dy) along `axis` ((H, W, 2) by default) -> (H, W, 3) uint8."""
    dx, dy = np.take(flow, 0, axis), np.take(flow, 1, axis)             # (H, W)
    hue = (np.arctan2(dy, dx) / (2 * np.pi)) % 1.0                       # (H, W)
    sat = np.clip(np.hypot(dx, dy) / max(max_mag, 1e-6), 0, 1)           # (H, W)
    hsv = np.stack([hue, sat, np.ones_like(sat)], -1)                     # (H, W, 3)
    return (hsv2rgb(hsv) * 255).round().astype(np.uint8)


def flow_key(side: int) -> np.ndarray:
    """The key (side, side, 3) uint8: a disc whose centre is zero flow and whose edge is the
    full length, each point coloured as the flow from the centre to it."""
    c = (side - 1) / 2
    ys, xs = np.mgrid[0:side, 0:side].astype(np.float64)                # (H, W)
    flow = np.stack([xs - c, ys - c], -1) / max(c, 1e-6)                 # (H, W, 2), |.| <= 1 inside
    key = flow_to_rgb(flow, 1.0)                                         # (H, W, 3)
    key[np.hypot(flow[..., 0], flow[..., 1]) > 1] = KEY_EDGE
    return key


def max_length(flows: list[np.ndarray], axis: int = -1) -> float:
    """The longest flow vector among `flows` (pixels): one scale for the flows drawn together."""
    lengths = [float(np.hypot(np.take(f, 0, axis), np.take(f, 1, axis)).max())
               for f in flows if f.size]
    return max(lengths + [1e-6])
