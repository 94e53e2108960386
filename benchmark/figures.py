"""The paper's qualitative figure for a few test pairs, drawn with Pillow.

Letters: B pairs, K capsules, H = W image side.

Per pair, a title line with the pair's IoU under the fixed assignment (benchmark.metrics: the
capsule each shape slot is given, chosen once over a test split, not per image), then three
rows of tiles, then one per extra:
1. I, I', ground-truth flow, predicted flow, I' warped to I with the predicted flow
   (I_warp(u) = I'(u + Phi(u)), the trainer's backward warp);
2. the ground-truth amodal mask of each slot (S tiles: the data's slots, its manifest's names),
   then each capsule's amodal mask Lambda_k, labelled with the slot the assignment gives it;
3. the same for the visible masks (ground truth, then Lambda+_k, by the visible assignment);
4. each of the method's `Prediction.extras` (its own maps, K' tiles each), in name order.
Flow colours: geogen.flowviz's wheel (zero flow white, hue the direction, saturation the
length), on one scale shared by the ground-truth and predicted flow of a pair so the two
compare; its key ends the first row.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy.ndimage import map_coordinates

from benchmark.metrics import THRESHOLD, SegmentationScore, iou_matrix, slot_masks, visible_masks
from benchmark.errors import BenchmarkError
from benchmark.records import public_mode
from benchmark.registry import Method, Prediction
from geogen.flowviz import flow_key, flow_to_rgb
from geogen.schema import SLOTS

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


@dataclass(frozen=True)
class Truth:
    """The ground truth of one pair's frame 0 and the fixed assignment it is scored under."""

    amodal: np.ndarray  # (S, H, W) bool
    visible: np.ndarray  # (H, W) uint8 label map, 0 background, s + 1 slot s
    present: np.ndarray  # (S,) bool
    assignment: Assignment


@dataclass(frozen=True)
class Assignment:
    """The capsule of each slot (-1: none), for the amodal and the visible masks, where it was
    chosen (for the figure's title), and the slots' names (the data's; Geo's by default)."""

    amodal: tuple[int, ...]  # (S,)
    visible: tuple[int, ...]  # (S,)
    source: str
    slots: tuple[str, ...] = SLOTS

    @classmethod
    def of(cls, metrics: dict, source: str, slots: tuple[str, ...] = SLOTS) -> Assignment:
        """From a record's or SegmentationScore's metrics."""
        try:
            amodal = tuple(int(metrics["assignment"][n]) for n in slots)
            visible = tuple(int(metrics["visible_assignment"][n]) for n in slots)
        except KeyError as err:
            raise BenchmarkError(f"the assignment names no slot {err}: it was scored on other "
                                 f"data than these slots ({', '.join(slots)})") from None
        return cls(amodal, visible, source, tuple(slots))

    def text(self) -> str:
        both = self.amodal == self.visible
        show = lambda caps: ", ".join(f"{n} {k}" for n, k in zip(self.slots, caps))  # noqa: E731
        what = "shape" if self.slots == SLOTS else "part"
        return (f"capsules by {what} ({self.source}): " + show(self.amodal)
                + ("" if both else f"; visible: {show(self.visible)}"))


def pair_iou(pred: Prediction, b: int, truth: Truth) -> tuple[float, float]:
    """Pair b's amodal and visible IoU under the fixed assignment: the mean over its present
    slots (benchmark.metrics' "all"), a slot without a capsule scoring 0."""
    amodal = iou_matrix(pred.masks[b:b + 1] > THRESHOLD, truth.amodal[None])[0]  # (K, S)
    visible = iou_matrix(visible_masks(pred.visible[b:b + 1]),
                         slot_masks(truth.visible[None], len(truth.present)))[0]  # (K, S)
    out = []
    for iou, caps in ((amodal, truth.assignment.amodal), (visible, truth.assignment.visible)):
        got = [iou[k, s] if k >= 0 else 0.0 for s, k in enumerate(caps) if truth.present[s]]
        out.append(float(np.mean(got)) if got else float("nan"))
    return out[0], out[1]


def _mask_row(kind: str, gt: list[np.ndarray], present: np.ndarray, maps: np.ndarray,
              caps: tuple[int, ...], slots: tuple[str, ...]) -> list[tuple[str, Image.Image]]:
    """S ground-truth tiles, then the K maps, each labelled with the slot it is assigned."""
    shape_of = {k: slots[s] for s, k in enumerate(caps) if k >= 0}
    row = [(f"gt {kind}{n}" if present[s] else f"{n}: absent", _tile(gt[s].astype(np.float32)))
           for s, n in enumerate(slots)]
    name = "visible" if kind else "mask"
    return row + [(f"{name} {k}" + (f" = {shape_of[k]}" if k in shape_of else ""), _tile(maps[k]))
                  for k in range(len(maps))]


def pair_rows(img0: np.ndarray, img1: np.ndarray, gt_flow: np.ndarray | None,
              pred: Prediction, b: int,
              truth: Truth | None = None) -> list[list[tuple[str, Image.Image]]]:
    """The three labelled rows of tiles for pair b of a batch; with `truth` the mask rows
    begin with the ground truth and name each capsule's assigned shape."""
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
    vis = pred.visible[b] / np.maximum(pred.visible[b].sum(0, keepdims=True), 1e-12)  # (K, H, W)
    if truth is None:
        masks = [(f"mask {i}", _tile(pred.masks[b, i])) for i in range(k)]
        visible = [(f"visible {i}", _tile(vis[i])) for i in range(k)]
    else:
        gt_vis = slot_masks(truth.visible[None], len(truth.present))[0]  # (S, H, W)
        slots = truth.assignment.slots
        masks = _mask_row("", list(truth.amodal), truth.present, pred.masks[b],
                          truth.assignment.amodal, slots)
        visible = _mask_row("visible ", list(gt_vis), truth.present, vis,
                            truth.assignment.visible, slots)
    extras = [[(f"{name} {i}", _tile(maps[b, i])) for i in range(maps.shape[1])]
              for name, maps in sorted(pred.extras.items())]
    return [top, masks, visible] + extras


def compose(rows: list[list[tuple[str, Image.Image]] | str], title: str) -> Image.Image:
    """Lay labelled tiles out in rows on a white sheet with a title line; a row that is a
    string is a line of text (a pair's title)."""
    font = ImageFont.load_default()
    cols = max([len(r) for r in rows if not isinstance(r, str)] + [1])
    cell_h = TILE + LABEL_H + PAD
    heights = [LABEL_H + PAD if isinstance(r, str) else cell_h for r in rows]
    sheet = Image.new("RGB", (cols * (TILE + PAD) + PAD, sum(heights) + LABEL_H + 2 * PAD),
                      "white")
    draw = ImageDraw.Draw(sheet)
    draw.text((PAD, PAD), title, fill="black", font=font)
    y = LABEL_H + PAD
    for row, height in zip(rows, heights):
        if isinstance(row, str):
            draw.text((PAD, y + PAD), row, fill="black", font=font)
            y += height
            continue
        for c, (label, tile) in enumerate(row):
            x = PAD + c * (TILE + PAD)
            draw.text((x, y), label, fill="black", font=font)
            sheet.paste(tile, (x, y + LABEL_H))
        y += height
    return sheet


def qualitative_figure(method: Method, model, frames: np.ndarray, flows: np.ndarray | None,
                       title: str, test: dict[str, np.ndarray] | None = None,
                       assignment: Assignment | None = None, first: int = 0,
                       slots: tuple[str, ...] = SLOTS) -> Image.Image:
    """frames (B, T, H, W, 3) uint8 test pairs, flows (B, H, W, 2) or None -> the figure.

    With `test` (the pairs' "amodal" (B, T, S, H, W), "visible" (B, T, H, W) and "present"
    (B, S)) each pair shows its ground truth and its IoU under `assignment` (None: chosen on
    these pairs, which the title then says). `first` numbers the pairs; `slots` names the S
    slots (the data's manifest's). A method that declares it sees the ground-truth flow gets
    `flows`, as in evaluation."""
    from benchmark.datasets import to_images
    img0, img1 = to_images(frames[:, 0]), to_images(frames[:, 1])  # (B, 3, H, W)
    pred, assignment = predict_and_assign(method, model, frames, flows, test, assignment, slots)
    if assignment is not None:
        title += "; " + assignment.text()
    rows: list = []
    for b in range(len(frames)):
        gt = None if flows is None else np.moveaxis(flows[b], -1, 0)  # (2, H, W)
        truth = None
        if test is not None:
            truth = Truth(test["amodal"][b, 0], test["visible"][b, 0],
                          test["present"][b].astype(bool), assignment)
            amodal, visible = pair_iou(pred, b, truth)
            rows.append(f"test pair {first + b}: amodal IoU {amodal:.3f}, visible IoU "
                        f"{visible:.3f} (fixed assignment)")
        rows += pair_rows(img0[b], img1[b], gt, pred, b, truth)
    return compose(rows, title)


def predict_and_assign(method: Method, model, frames: np.ndarray, flows: np.ndarray | None,
                       test: dict[str, np.ndarray] | None, assignment: Assignment | None,
                       slots: tuple[str, ...]) -> tuple[Prediction, Assignment | None]:
    """The method's checked prediction for the pairs, and `assignment` or, with `test` and
    none given, one chosen on these pairs."""
    from benchmark.evaluate import predict
    pred = predict(method, model, frames, flows)
    pred.check(len(frames), frames.shape[2])
    if test is not None and assignment is None:
        score = SegmentationScore(K=pred.masks.shape[1], names=slots)
        score.update(pred.masks, pred.visible, test["amodal"][:, 0], test["visible"][:, 0],
                     test["present"])
        n = len(frames)
        assignment = Assignment.of(score.compute(), f"chosen on the {n} pair{'s' * (n > 1)} "
                                                    f"drawn", slots)
    return pred, assignment


def save_image(image: Image.Image, path: Path) -> Path:
    """Save as the type `path`'s extension names (geogen.sheet.image_format, as `geogen show`
    does), to a temporary name beside it, then rename; a failure (a full disk) leaves no
    temporary file and is one line."""
    from geogen.sheet import image_format
    fmt = image_format(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        os.close(fd)
    except OSError as err:
        raise BenchmarkError(f"cannot write {path}: {err.strerror or err}") from None
    try:
        image.save(tmp, format=fmt)
        os.chmod(tmp, public_mode())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise BenchmarkError(f"cannot write {path}: {err.strerror or err}") from None
        raise
    return path
