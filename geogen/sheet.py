"""Contact sheet: one row per sample with its frames, flow as a colour wheel, visible labels and
amodal masks (frame 0), so a folder can be inspected by eye.

Letters: N samples, T frames, S slots, H = W = image side.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image
from skimage.color import hsv2rgb

from geogen import schema
from geogen.dataset import GeoDataset
from geogen.errors import GeogenError

# Label colours for `visible`: background grey, then circle, square, triangle.
PALETTE = np.array([[40, 40, 40], [230, 80, 60], [70, 170, 80], [60, 110, 230]], np.uint8)
GAP = 2
MIN_TILE = 96   # small images are enlarged (nearest neighbour) to at least this side


def flow_to_rgb(flow: np.ndarray, max_norm: float) -> np.ndarray:
    """Flow (H, W, 2) as colour: hue is the direction, saturation the length / max_norm."""
    dx, dy = flow[..., 0], flow[..., 1]
    hue = (np.arctan2(dy, dx) / (2 * np.pi)) % 1.0                     # (H, W)
    sat = np.clip(np.hypot(dx, dy) / max(max_norm, 1e-6), 0, 1)        # (H, W)
    hsv = np.stack([hue, sat, np.ones_like(sat)], -1)                   # (H, W, 3)
    return (hsv2rgb(hsv) * 255).round().astype(np.uint8)


def sample_tiles(item: dict[str, np.ndarray], max_norm: float) -> list[np.ndarray]:
    """The tiles (H, W, 3) uint8 of one sample, left to right."""
    tiles = list(item["frames"])                                        # T x (H, W, 3)
    tiles += [flow_to_rgb(f, max_norm) for f in item["flow"]]           # (T-1) x
    tiles += [PALETTE[v] for v in item["visible"]]                      # T x
    tiles += [np.repeat(m[..., None].astype(np.uint8) * 255, 3, -1)
              for m in item["amodal"][0]]                               # S x
    return tiles


def contact_sheet(root: str | Path, split: str, indices: Sequence[int], out: str | Path) -> Path:
    """Write a PNG contact sheet of samples `indices` of `split`; returns its path."""
    ds = GeoDataset(root, split, ("frames", "flow", "visible", "amodal"))
    bad = [i for i in indices if not 0 <= i < len(ds)]
    if bad:
        raise GeogenError(f"index {bad[0]} out of range: {split} has {len(ds)} samples")
    items = [{k: v.numpy() for k, v in ds[i].items()} for i in indices]
    max_norm = max([float(np.abs(it["flow"]).max()) for it in items] + [1e-6])
    rows = [sample_tiles(it, max_norm) for it in items]
    scale = max(1, int(np.ceil(MIN_TILE / ds.size)))
    tile = ds.size * scale
    cols = max(len(r) for r in rows)
    sheet = np.full((len(rows) * (tile + GAP) + GAP, cols * (tile + GAP) + GAP, 3), 255, np.uint8)
    for r, row in enumerate(rows):
        for c, img in enumerate(row):
            y, x = GAP + r * (tile + GAP), GAP + c * (tile + GAP)
            sheet[y:y + tile, x:x + tile] = img.repeat(scale, 0).repeat(scale, 1)
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp.png")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(sheet).save(tmp)
        os.replace(tmp, out)
    except OSError as err:
        raise GeogenError(f"{out}: cannot write the sheet ({err.strerror or err})") from None
    return out


def legend() -> str:
    """What each column of a row shows (for the CLI)."""
    return ("columns: frames | forward flow (hue = direction) | visible (grey background, "
            "red circle, green square, blue triangle) | amodal masks at frame 0 ("
            + ", ".join(schema.SLOTS) + ")")
