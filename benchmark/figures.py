"""The paper's qualitative figure for a few test pairs, drawn with Pillow.

Letters: B pairs, K capsules, H = W image side.

Per pair, three rows of tiles, then one per extra:
1. I, I', ground-truth flow, predicted flow, I' warped to I with the predicted flow
   (I_warp(u) = I'(u + Phi(u)), the trainer's backward warp);
2. each capsule's amodal mask Lambda_k;
3. each capsule's visible mask Lambda+_k;
4. each of the method's `Prediction.extras` (its own maps, K' tiles each), in name order.
Flow colours: geogen.flowviz's wheel (zero flow white, hue the direction, saturation the
length), on one scale shared by the ground-truth and predicted flow of a pair so the two
compare; its key ends the first row.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy.ndimage import map_coordinates

from benchmark.errors import BenchmarkError
from benchmark.records import public_mode
from benchmark.registry import Method, Prediction
from geogen.flowviz import flow_key, flow_to_rgb

TILE = 128  # tiles are drawn at this side whatever the image size
LABEL_H = 16
PAD = 4


def warp_backward(img1: np.ndarray, flow: np.ndarray) -> np.ndarray:
    """Sample I' (3, H, W) at u + flow(u) (bilinear, edge-clamped): I' warped onto I's grid."""
    _, h, w = img1.shape
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)  # (H, W) pixel indices (= centres - 0.5)
    coords = [ys + flow[1], xs + flow[0]]  # flow is (dx, dy); arrays index (row=y, col=x)
    return np.stack([map_coordinates(c, coords, order=1, mode="nearest") for c in img1])


def _tile(arr: np.ndarray) -> Image.Image:
    """(H, W) float in [0, 1] or (H, W, 3) uint8 -> a TILE x TILE image (nearest upscale)."""
    if arr.ndim == 2:
        arr = (np.clip(arr, 0, 1) * 255).astype(np.uint8)
    return Image.fromarray(arr).resize((TILE, TILE), Image.NEAREST)


def _rgb(img: np.ndarray) -> np.ndarray:
    """(3, H, W) float in [0, 1] -> (H, W, 3) uint8."""
    return (np.clip(img.transpose(1, 2, 0), 0, 1) * 255).astype(np.uint8)


def pair_rows(img0: np.ndarray, img1: np.ndarray, gt_flow: np.ndarray | None,
              pred: Prediction, b: int) -> list[list[tuple[str, Image.Image]]]:
    """The three labelled rows of tiles for pair b of a batch."""
    k = pred.masks.shape[1]
    flows = [f for f in (gt_flow, pred.flow[b] if pred.flow is not None else None) if f is not None]
    max_mag = max([float(np.hypot(f[0], f[1]).max()) for f in flows] + [1e-6])
    top = [("I", _tile(_rgb(img0))), ("I'", _tile(_rgb(img1)))]
    if gt_flow is not None:
        top.append((f"gt flow (max {max_mag:.1f}px)", _tile(flow_to_rgb(gt_flow, max_mag, 0))))
    if pred.flow is not None:
        top.append(("predicted flow", _tile(flow_to_rgb(pred.flow[b], max_mag, 0))))
        top.append(("I' warped to I", _tile(_rgb(warp_backward(img1, pred.flow[b])))))
    if flows:
        top.append(("flow key", _tile(flow_key(TILE))))
    masks = [(f"mask {i}", _tile(pred.masks[b, i])) for i in range(k)]
    vis = pred.visible[b] / np.maximum(pred.visible[b].sum(0, keepdims=True), 1e-12)  # (K, H, W)
    visible = [(f"visible {i}", _tile(vis[i])) for i in range(k)]
    extras = [[(f"{name} {i}", _tile(maps[b, i])) for i in range(maps.shape[1])]
              for name, maps in sorted(pred.extras.items())]
    return [top, masks, visible] + extras


def compose(rows: list[list[tuple[str, Image.Image]]], title: str) -> Image.Image:
    """Lay labelled tiles out in rows on a white sheet with a title line."""
    font = ImageFont.load_default()
    cols = max(len(r) for r in rows)
    cell_h = TILE + LABEL_H + PAD
    sheet = Image.new("RGB", (cols * (TILE + PAD) + PAD, len(rows) * cell_h + LABEL_H + 2 * PAD),
                      "white")
    draw = ImageDraw.Draw(sheet)
    draw.text((PAD, PAD), title, fill="black", font=font)
    for r, row in enumerate(rows):
        y = LABEL_H + PAD + r * cell_h
        for c, (label, tile) in enumerate(row):
            x = PAD + c * (TILE + PAD)
            draw.text((x, y), label, fill="black", font=font)
            sheet.paste(tile, (x, y + LABEL_H))
    return sheet


def qualitative_figure(method: Method, model, frames: np.ndarray, flows: np.ndarray | None,
                       title: str) -> Image.Image:
    """frames (B, T, H, W, 3) uint8 test pairs, flows (B, H, W, 2) or None -> the figure.

    A method that declares it sees the ground-truth flow gets `flows`, as in evaluation."""
    from benchmark.datasets import to_images
    from benchmark.evaluate import predict
    img0, img1 = to_images(frames[:, 0]), to_images(frames[:, 1])  # (B, 3, H, W)
    pred = predict(method, model, frames, flows)
    pred.check(len(frames), frames.shape[2])
    rows = []
    for b in range(len(frames)):
        gt = None if flows is None else np.moveaxis(flows[b], -1, 0)  # (2, H, W)
        rows += pair_rows(img0[b], img1[b], gt, pred, b)
    return compose(rows, title)


def save_png(image: Image.Image, path: Path) -> Path:
    """Save to a temporary name beside `path`, then rename; a failure (a full disk) leaves no
    temporary file and is one line."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        os.close(fd)
    except OSError as err:
        raise BenchmarkError(f"cannot write {path}: {err.strerror or err}") from None
    try:
        image.save(tmp, format="PNG")
        os.chmod(tmp, public_mode())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise BenchmarkError(f"cannot write {path}: {err.strerror or err}") from None
        raise
    return path
