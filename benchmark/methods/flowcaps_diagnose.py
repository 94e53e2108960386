"""Probes of a trained FlowCapsules checkpoint: where its amodal IoU goes (`flowbench diagnose`).

FlowCapsules' own tool, kept beside its adapter (benchmark/methods/flowcaps.py) rather than in
the benchmark's core; the adapter lists `command` in its `commands`, which `flowbench` adds.

Letters: B test images, K capsules, S slots (the data's; Geo's 3 shapes), H, W image side.

Every probe reads frame 0 of the first B test pairs and uses the fixed capsule-to-slot
assignment chosen on those pairs (benchmark.metrics.SegmentationScore).
- dupes: each capsule's mean amodal and visible IoU with each class and how often it is the
  image's best amodal match. Two capsules drawing the same shape (duplicates) show up as a class
  with two capsules of high amodal IoU: the losses cannot tell such copies apart, and the fixed
  assignment loses wherever the other copy is the better one.
- owners: for each class, the share of its ground-truth visible pixels where each capsule has
  the largest visibility. Low visible IoU with right amodal masks means another capsule sits in
  front of the assigned one and shows the shape.
- oracle: each assigned capsule keeps its shape code, and only its 4 pose numbers are fitted,
  per image, to the ground-truth amodal mask. The IoU then bounds what better pose regression
  alone could give; the gap to 1 is the decoder's.

torch and flowcaps are imported inside the functions, so the `flowbench` command starts
without them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from benchmark.errors import BenchmarkError
from benchmark.metrics import THRESHOLD, SegmentationScore, iou_matrix, slot_masks, visible_masks
from geogen.schema import SLOTS

PROBES = ("dupes", "owners", "oracle")
DUPLICATE_IOU = 0.5  # a capsule whose mask overlaps a shape by more than this draws it

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class ProbePairs:
    """Frame 0 of B test pairs and its ground truth."""

    images: np.ndarray  # (B, 3, H, W) float32 in [0, 1]
    amodal: np.ndarray  # (B, S, H, W) bool
    visible: np.ndarray  # (B, H, W) uint8 label map, 0 background, s + 1 slot s
    present: np.ndarray  # (B, S) bool
    slots: tuple[str, ...] = SLOTS  # the data's slot names (its manifest's)


def capsule_table(masks: np.ndarray, visible: np.ndarray, pairs: ProbePairs) -> dict[str, dict]:
    """The dupes probe. masks, visible (B, K, H, W) -> per class, per capsule numbers (lists of K).

    Per class over the images where it is present: mean amodal IoU, mean visible IoU, the share
    of images where the capsule is the best amodal match, the capsules whose mean amodal IoU
    exceeds DUPLICATE_IOU and the share of images where a second capsule does too.
    """
    amodal = iou_matrix(masks > THRESHOLD, pairs.amodal)  # (B, K, S)
    shown = iou_matrix(visible_masks(visible), slot_masks(pairs.visible, len(pairs.slots)))
    k = masks.shape[1]  # shown: (B, K, S)
    out = {}
    for s, name in enumerate(pairs.slots):
        sel = pairs.present[:, s]
        if not sel.any():
            continue
        a = amodal[sel, :, s]  # (N, K)
        mean = a.mean(0)  # (K,)
        second = np.sort(a, 1)[:, -2] if k > 1 else np.zeros(len(a))  # (N,)
        out[name] = {"images": int(sel.sum()), "amodal_iou": mean.tolist(),
                     "visible_iou": shown[sel, :, s].mean(0).tolist(),
                     "best_share": (np.bincount(a.argmax(1), minlength=k) / len(a)).tolist(),
                     "drawn_by": [int(c) for c in np.flatnonzero(mean > DUPLICATE_IOU)],
                     "second_share": float((second > DUPLICATE_IOU).mean())}
    return out


def visible_owners(visible: np.ndarray, gt_visible: np.ndarray,
                   slots: tuple[str, ...] = SLOTS) -> dict[str, list[float]]:
    """The owners probe. visible (B, K, H, W), gt_visible (B, H, W) -> per class, the share (K,)
    of its visible pixels where each capsule has the largest visibility."""
    owner = visible.argmax(1)  # (B, H, W)
    out = {}
    for s, name in enumerate(slots):
        inside = gt_visible == s + 1  # (B, H, W)
        if inside.any():
            counts = np.bincount(owner[inside], minlength=visible.shape[1])  # (K,)
            out[name] = (counts / inside.sum()).tolist()
    return out


def fit_poses(model: Any, shape: torch.Tensor, pose: torch.Tensor, gt: torch.Tensor, steps: int,
              lr: float, band: int = 3) -> torch.Tensor:
    """Poses (N, 1, 4) fitted from `pose` to the amodal masks gt (N, H, W) of one capsule each.

    shape (N, 1, |s|) stays fixed; the loss is the binary cross-entropy of the capsule's mask
    logits against gt, descended by Adam on the pose alone. Only pixels within `band` px of an
    edge of gt or of the starting mask enter it: elsewhere both are saturated and agree, and
    the full grid costs ten times more. Each image's loss reaches only its own pose, and Adam's
    steps do not depend on the batch mean's 1/N (up to its epsilon), so every image is fitted
    on its own.
    """
    import torch
    import torch.nn.functional as F
    from flowcaps import geometry
    from flowcaps.refine import edge_band

    n, side = gt.shape[0], gt.shape[-1]
    grid = geometry.pixel_centres(side, side, gt.device)  # (H*W, 2)
    with torch.no_grad():
        start = model.decoder(shape, geometry.to_canonical(pose, grid.expand(n, -1, -1))) > 0
    edges = torch.stack([gt, start.view(n, side, side).float(), gt], 1)  # (N, 3, H, W)
    near = edge_band(edges, band)  # (N, H*W)
    # Band pixels first in each row, rows padded to the longest band with weight 0.
    p = max(int(near.sum(1).max()), 1)
    order = torch.sort(near.float(), dim=1, descending=True, stable=True).indices[:, :p]  # (N, P)
    weight = near.gather(1, order).float()  # (N, P)
    u, target = grid[order], gt.flatten(1).gather(1, order)  # (N, P, 2), (N, P)
    x = pose.detach().clone().requires_grad_(True)  # (N, 1, 4)
    opt = torch.optim.Adam([x], lr=lr)
    with torch.enable_grad():
        for _ in range(steps):
            logit = model.decoder(shape, geometry.to_canonical(x, u)).float()[:, 0]  # (N, P)
            loss = F.binary_cross_entropy_with_logits(logit, target, reduction="none")  # (N, P)
            opt.zero_grad()
            ((loss * weight).sum(1) / weight.sum(1).clamp_min(1)).mean().backward()
            opt.step()
    return x.detach()


def pose_oracle(model: Any, pairs: ProbePairs, assignment: np.ndarray, steps: int = 300,
                lr: float = 3e-3, batch: int = 100) -> dict[str, dict]:
    """The oracle probe: per class, amodal IoU of the assigned capsule with the encoder's poses
    and with poses fitted to the ground truth, and the mean pose change (pixels, relative scale)."""
    from flowcaps import geometry

    side = pairs.images.shape[-1]
    u = geometry.pixel_centres(side, side, next(model.parameters()).device)[None]  # (1, H*W, 2)
    import torch
    # BCE on saturated logits gives tiny gradients; denormal floats are very slow on x86.
    torch.set_flush_denormal(True)
    trainable = [p for p in model.parameters() if p.requires_grad]
    for p in trainable:  # only the poses are fitted
        p.requires_grad_(False)
    try:
        return _oracle_per_class(model, pairs, assignment, u, steps, lr, batch)
    finally:
        for p in trainable:
            p.requires_grad_(True)


def _oracle_per_class(model: Any, pairs: ProbePairs, assignment: np.ndarray, u: torch.Tensor,
                      steps: int, lr: float, batch: int) -> dict[str, dict]:
    import torch
    from flowcaps import geometry

    dev, side = u.device, pairs.images.shape[-1]
    out = {}
    for s, name in enumerate(pairs.slots):
        idx = np.flatnonzero(pairs.present[:, s])
        k = int(assignment[s])
        if len(idx) == 0 or k < 0:
            continue
        before, after, shift, scale = [], [], [], []
        for lo in range(0, len(idx), batch):
            sel = idx[lo:lo + batch]
            images = torch.from_numpy(pairs.images[sel]).to(dev)  # (N, 3, H, W)
            gt = torch.from_numpy(pairs.amodal[sel, s]).to(dev).float()  # (N, H, W)
            with torch.no_grad():
                code, pose, _ = model.encode(images)  # (N, K, |s|), (N, K, 4)
            code, pose = code[:, k:k + 1], pose[:, k:k + 1]  # (N, 1, |s|), (N, 1, 4)
            fitted = fit_poses(model, code, pose, gt, steps, lr)  # (N, 1, 4)
            for p, acc in ((pose, before), (fitted, after)):
                with torch.no_grad():
                    v = geometry.to_canonical(p, u.expand(len(sel), -1, -1))  # (N, 1, H*W, 2)
                    on = model.decoder(code, v).float()[:, 0] > 0  # (N, H*W): Lambda > 1/2
                acc.append(_iou(on.cpu().numpy(), pairs.amodal[sel, s].reshape(len(sel), -1)))
            change = (fitted - pose)[:, 0]  # (N, 4)
            shift.append((change[:, :2].norm(dim=-1) * side / 2).cpu().numpy())  # frame -> px
            scale.append((change[:, 3] / pose[:, 0, 3]).cpu().numpy())
        out[name] = {"capsule": k, "images": len(idx),
                     "encoder_iou": float(np.concatenate(before).mean()),
                     "fitted_iou": float(np.concatenate(after).mean()),
                     "shift_px": float(np.concatenate(shift).mean()),
                     "scale_change": float(np.concatenate(scale).mean())}
    return out


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise IoU of two (N, P) bool arrays; 1 where both are empty (benchmark.metrics)."""
    inter, union = (a & b).sum(1), (a | b).sum(1)
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def read_pairs(data: Path, n: int) -> ProbePairs:
    """Frame 0 of the first n test pairs of a geogen folder, with its ground truth."""
    from geogen.dataset import open_split
    from geogen.errors import GeogenError
    try:
        split = open_split(data, "test")
        test = split.read(("frames", "amodal", "visible", "present"), limit=n)
    except GeogenError as err:
        raise BenchmarkError(f"reading the test split of {data}: {err}") from None
    if len(test["frames"]) == 0:
        raise BenchmarkError(f"{data} has no test pairs")
    frames = test["frames"][:, 0].transpose(0, 3, 1, 2)  # (B, 3, H, W) uint8
    return ProbePairs(images=np.ascontiguousarray(frames, dtype=np.float32) / 255.0,
                      amodal=test["amodal"][:, 0], visible=test["visible"][:, 0],
                      present=test["present"].astype(bool), slots=split.slots)


def diagnose(model: Any, pairs: ProbePairs, probes: tuple[str, ...] = PROBES,
             oracle_steps: int = 300, batch: int = 100) -> dict[str, Any]:
    """Run `probes` on a FlowCapsules model; a dict of the scores, the assignment and each probe."""
    import torch

    dev = next(model.parameters()).device
    masks, visible, depth = [], [], []
    for lo in range(0, len(pairs.images), batch):
        with torch.no_grad():
            caps = model.parse(torch.from_numpy(pairs.images[lo:lo + batch]).to(dev))
        masks.append(caps.masks.float().cpu().numpy())  # (b, K, H, W)
        visible.append(caps.visible.float().cpu().numpy())
        depth.append(caps.depth.float().cpu().numpy())  # (b, K)
    masks, visible, depth = np.concatenate(masks), np.concatenate(visible), np.concatenate(depth)
    score = SegmentationScore(K=masks.shape[1], names=pairs.slots)
    score.update(masks, visible, pairs.amodal, pairs.visible, pairs.present)
    out: dict[str, Any] = {"pairs": len(masks), "scores": score.compute(),
                           "area_px": (masks > THRESHOLD).sum((2, 3)).mean(0).tolist(),
                           "depth_rank": (-depth).argsort(1).argsort(1).mean(0).tolist()}
    if "dupes" in probes:
        out["dupes"] = capsule_table(masks, visible, pairs)
    if "owners" in probes:
        out["owners"] = visible_owners(visible, pairs.visible, pairs.slots)
    if "oracle" in probes:
        out["oracle"] = pose_oracle(model, pairs, score.assignment(), steps=oracle_steps,
                                    batch=batch)
    return out


def report(result: dict[str, Any]) -> str:
    """The result of `diagnose` as text, one block per probe."""
    sc = result["scores"]
    nums = lambda xs, f="{:.3f}": " ".join(f.format(x) for x in xs)  # noqa: E731
    cls = lambda d: ", ".join(f"{k} {v:.3f}" for k, v in d.items() if v is not None)  # noqa: E731
    lines = [f"assignment: {', '.join(f'{k} {v}' for k, v in sc['assignment'].items())}",
             f"amodal IoU fixed: {cls(sc['amodal_iou'])}",
             f"amodal IoU per image: {cls(sc['amodal_iou_per_image'])}",
             f"visible IoU fixed: {cls(sc['visible_iou'])}",
             f"capsule mean amodal area (px): {nums(result['area_px'], '{:.0f}')}",
             f"capsule mean depth rank (0 = front): {nums(result['depth_rank'], '{:.1f}')}"]
    if "dupes" in result:
        lines.append("\n== dupes: each capsule against each class, over the images where it is present")
        for name, d in result["dupes"].items():
            lines += [f"{name} ({d['images']} images)",
                      f"  amodal IoU   {nums(d['amodal_iou'])}",
                      f"  visible IoU  {nums(d['visible_iou'])}",
                      f"  best match   {nums(d['best_share'])}",
                      f"  drawn by capsules {d['drawn_by']} (mean amodal IoU > {DUPLICATE_IOU}); "
                      f"a second capsule covers it in {d['second_share']:.0%} of the images"]
    if "owners" in result:
        lines.append("\n== owners: share of each class's visible pixels shown by each capsule")
        for name, share in result["owners"].items():
            lines.append(f"{name} (assigned {sc['assignment'][name]}): {nums(share)}")
    if "oracle" in result:
        lines.append("\n== oracle: the assigned capsule's poses fitted to the ground truth, shapes kept")
        for name, d in result["oracle"].items():
            lines.append(f"{name} (capsule {d['capsule']}, {d['images']} images): encoder's poses "
                         f"{d['encoder_iou']:.3f}, fitted {d['fitted_iou']:.3f}; pose change "
                         f"{d['shift_px']:.2f} px, scale {d['scale_change']:+.1%}")
    return "\n".join(lines)


def checkpoint_data(loaded: Any, checkpoint: Path) -> Path:
    """The folder the checkpoint was trained on (its meta's `data`), when it is on this machine;
    else a one-line error asking for --data."""
    trained = (loaded.trained_with or {}).get("meta", {}).get("data")
    if trained and (Path(trained) / "manifest.json").is_file():
        return Path(trained)
    where = f"its training data {trained} is not on this machine" if trained else \
        "it does not name its training data"
    raise BenchmarkError(f"{checkpoint}: {where}; pass --data DIR, a folder of the same dataset "
                         f"at {loaded.image_size} px")


@click.command("diagnose", epilog="\b\nExample:\n  flowbench diagnose "
                                  "checkpoints/flowcaps_geo_quick.pt --pairs 200 --probe dupes")
@click.argument("checkpoint", type=click.Path(path_type=Path))
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="dataset folder (default: the one the checkpoint was trained on, when it is "
                   "here)")
@click.option("--pairs", type=click.IntRange(1), default=200, show_default=True,
              help="first N test pairs (frame 0)")
@click.option("--probe", type=click.Choice([*PROBES, "all"]), default="all", show_default=True)
@click.option("--oracle-steps", type=click.IntRange(1), default=300, hidden=True)
def command(checkpoint, data, pairs, probe, oracle_steps):
    """Probe a FlowCapsules checkpoint: duplicate capsules, who shows each class, a pose oracle."""
    from benchmark.registry import get_method
    loaded = get_method("flowcaps").load(checkpoint)
    data = data or checkpoint_data(loaded, checkpoint)
    test = read_pairs(data, pairs)
    if test.images.shape[-1] != loaded.image_size:
        raise BenchmarkError(f"the checkpoint expects {loaded.image_size} px but {data} holds "
                             f"{test.images.shape[-1]} px")
    click.echo(f"{checkpoint}: first {len(test.images)} test pairs of {data}")
    probes = PROBES if probe == "all" else (probe,)
    click.echo(report(diagnose(loaded.model, test, probes, oracle_steps=oracle_steps)))
