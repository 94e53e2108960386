"""The parts figure (`flowbench show --kind parts`): each capsule's mask on the body parts, as
the paper's Exercise figure draws them, for data of many parts (the articulated figures).

Letters: B pairs, K capsules, S slots (the data's parts), H = W image side.

Per pair, a title line with its IoU under the fixed assignment, then one row of tiles:
1. frame 0;
2. the ground-truth parts: each visible part in its own colour (geogen.sheet.PALETTE: slot s
   takes entry s + 1) over the image, darkened so the colours stand out;
3. the capsules' parts: each pixel in the colour of the capsule whose visible map is largest
   there, where that map passes the metrics' threshold; a capsule takes the colour of the part
   the visible assignment gives it (white when it is given none), so where row 2 and row 3
   agree in colour the method found that part;
4. each capsule's amodal mask Lambda_k (thresholded as the metrics do) over the image in its
   part's colour: the capsules the amodal assignment gives a part first, in slot order, then
   the others.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

from benchmark.figures import (TILE, Assignment, Truth, compose, pair_iou,
                               predict_and_assign)
from benchmark.metrics import THRESHOLD
from benchmark.registry import Method
from geogen.sheet import PALETTE

SPARE = np.array([255, 255, 255], np.uint8)  # a capsule that no part is assigned to
DIM = 0.45  # the image's brightness under the colours


def part_colours(slots: int) -> np.ndarray:
    """(S, 3) uint8: slot s's colour, geogen's label colours (entry 0 is the background)."""
    if slots + 1 > len(PALETTE):
        raise ValueError(f"{slots} parts, but the palette has {len(PALETTE) - 1} colours")
    return PALETTE[1:slots + 1]


def capsule_colours(caps: tuple[int, ...], k: int) -> np.ndarray:
    """(K, 3) uint8: each capsule in the colour of the part `caps` (S,) gives it, else SPARE."""
    out = np.tile(SPARE, (k, 1))
    colours = part_colours(len(caps))
    for s, c in enumerate(caps):
        if c >= 0:
            out[c] = colours[s]
    return out


def paint(image: np.ndarray, labels: np.ndarray, colours: np.ndarray) -> np.ndarray:
    """image (H, W, 3) uint8 darkened, with each pixel of label l >= 0 (H, W) set to
    colours[l]; label -1 leaves the darkened image."""
    out = (image.astype(np.float32) * DIM).astype(np.uint8)  # (H, W, 3)
    on = labels >= 0
    out[on] = colours[labels[on]]
    return out


def winner(visible: np.ndarray) -> np.ndarray:
    """(K, H, W) visible maps -> (H, W) the largest map's capsule where it passes the
    threshold, -1 elsewhere."""
    best = visible.argmax(0)  # (H, W)
    return np.where(visible.max(0) > THRESHOLD, best, -1)


def capsule_order(caps: tuple[int, ...], k: int) -> list[int]:
    """The K capsules, those assigned a part first (in slot order), then the rest."""
    first = [c for c in caps if c >= 0]
    return first + [c for c in range(k) if c not in first]


def _tile(rgb: np.ndarray) -> Image.Image:
    return Image.fromarray(rgb).resize((TILE, TILE), Image.NEAREST)


def parts_row(frame: np.ndarray, masks: np.ndarray, visible: np.ndarray,
              truth: Truth) -> list[tuple[str, Image.Image]]:
    """The row of one pair: frame (H, W, 3) uint8, masks and visible (K, H, W), its truth."""
    a, slots = truth.assignment, truth.assignment.slots
    k = len(masks)
    gt = paint(frame, truth.visible.astype(np.int64) - 1, part_colours(len(slots)))
    row = [("I", _tile(frame)), ("gt parts", _tile(gt)),
           ("capsules' parts", _tile(paint(frame, winner(visible), capsule_colours(a.visible, k))))]
    amodal_colours = capsule_colours(a.amodal, k)
    part_of = {c: slots[s] for s, c in enumerate(a.amodal) if c >= 0}
    for c in capsule_order(a.amodal, k):
        on = np.where(masks[c] > THRESHOLD, 0, -1)  # (H, W)
        row.append((f"{c}: {part_of[c]}" if c in part_of else f"capsule {c}",
                    _tile(paint(frame, on, amodal_colours[c][None]))))
    return row


def parts_figure(method: Method, model, frames: np.ndarray, flows: np.ndarray | None,
                 title: str, test: dict[str, np.ndarray], slots: tuple[str, ...],
                 assignment: Assignment | None = None, first: int = 0) -> Image.Image:
    """frames (B, T, H, W, 3) uint8 test pairs with their `test` truth ("amodal", "visible",
    "present"), flows (B, H, W, 2) for a method that sees them -> the figure; `assignment`
    as for benchmark.figures.qualitative_figure (None: chosen on these pairs)."""
    part_colours(len(slots))  # refuses more parts than colours before the model runs
    pred, assignment = predict_and_assign(method, model, frames, flows, test, assignment, slots)
    rows: list = []
    for b in range(len(frames)):
        truth = Truth(test["amodal"][b, 0], test["visible"][b, 0],
                      test["present"][b].astype(bool), assignment)
        amodal, visible = pair_iou(pred, b, truth)
        rows.append(f"test pair {first + b}: amodal IoU {amodal:.3f}, visible IoU "
                    f"{visible:.3f} (fixed assignment)")
        rows.append(parts_row(frames[b, 0], pred.masks[b], pred.visible[b], truth))
    return compose(rows, f"{title}; {assignment.text()}")
