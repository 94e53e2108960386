# Geo's ground-truth rule rebuilt from the stored poses, shared by ties.py and centregt.py.
import numpy as np


def to_canonical(pose, xy):
    """geogen.schema's pose (centre x, centre y, angle, size) -> the unit shape's frame: (N, 2)."""
    cx, cy, a, k = (float(v) for v in pose)
    d = xy - np.array([cx, cy], np.float32)
    c, s = np.cos(a), np.sin(a)
    return np.stack([c * d[:, 0] + s * d[:, 1], c * d[:, 1] - s * d[:, 0]], -1) / k


def subsample_offsets(ss):
    """Offsets (ss*ss, 2) of an ss x ss grid of subsample centres around a pixel centre."""
    g = (np.arange(ss, dtype=np.float32) + 0.5) / ss - 0.5
    gx, gy = np.meshgrid(g, g)
    return np.stack([gx.ravel(), gy.ravel()], -1)
