"""Development evaluator: amodal IoU of a flowcaps checkpoint with the fixed assignment.

Letters: N images, K capsules, S slots (the data's manifest names them), H, W image side.

Masks Lambda_k are thresholded at 0.5; for every capsule k and slot s the IoU with the slot's
`amodal` mask is averaged over the test images where s is present, giving a K x S matrix; scipy's
`linear_sum_assignment` (through `benchmark.metrics`) picks one capsule per slot (maximum total IoU), fixed for the whole split.
Reported: each slot's IoU, their mean ("mean_over_slots") and the mean over every present
(image, slot) instance ("all"). Frame 0 of every clip is evaluated.

    .venv/bin/python scripts/eval_flowcaps_dev.py CHECKPOINT DATA_ROOT [--split test] [--limit N]
"""
from __future__ import annotations

import json
import sys
import time

import click
import numpy as np
import torch

from benchmark.metrics import THRESHOLD, hungarian, iou_matrix
from flowcaps import checkpoint
from flowcaps.errors import FlowcapsError
from flowcaps.model import FlowCapsules
from geogen.schema import SLOTS


@torch.no_grad()
def iou_sums(model: FlowCapsules, frames: np.ndarray, amodal: np.ndarray, batch: int = 200,
             progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Sum over images of IoU(capsule k, slot s) where s is present, and the present counts.

    frames (N, H, W, 3) uint8; amodal (N, S, H, W) bool -> (K, S) sums, (S,) counts.
    """
    k = model.config.num_capsules
    sums = np.zeros((k, amodal.shape[1]))
    counts = np.zeros(amodal.shape[1])
    starts = range(0, len(frames), batch)
    if progress:
        from tqdm import tqdm
        starts = tqdm(starts, desc="eval", unit="batch")
    for i in starts:
        img = torch.from_numpy(frames[i:i + batch]).permute(0, 3, 1, 2).float() / 255  # (B, 3, H, W)
        pred = (model.parse(img).masks > THRESHOLD).numpy()  # (B, K, H, W)
        gt = amodal[i:i + batch]  # (B, S, H, W)
        present = gt.any((2, 3))  # (B, S)
        sums += (iou_matrix(pred, gt) * present[:, None]).sum(0)  # (K, S)
        counts += present.sum(0)
    return sums, counts


def fixed_assignment(sums: np.ndarray, counts: np.ndarray,
                     slots: tuple[str, ...] = SLOTS) -> dict:
    """One capsule per slot by Hungarian matching on the mean IoU matrix (K x S); `slots`
    names the data's slots (its manifest's)."""
    mean = sums / np.maximum(counts, 1)  # (K, S)
    capsule_of = hungarian(mean)  # (S,) capsule index per slot
    pairs = [(int(k), s) for s, k in enumerate(capsule_of) if k >= 0]
    per = {slots[s]: float(mean[k, s]) for k, s in pairs}
    total = sum(sums[k, s] for k, s in pairs) / max(counts.sum(), 1)
    return {"per_slot": per, "capsule_of_slot": {slots[s]: k for k, s in pairs},
            "mean_over_slots": float(np.mean(list(per.values()))),
            "all": float(total), "counts": {slots[s]: int(c) for s, c in enumerate(counts)},
            "iou_matrix": mean.round(4).tolist()}


def evaluate(model: FlowCapsules, frames: np.ndarray, amodal: np.ndarray, progress: bool = False,
             slots: tuple[str, ...] = SLOTS) -> dict:
    sums, counts = iou_sums(model, frames, amodal, progress=progress)
    return fixed_assignment(sums, counts, slots)


@click.command()
@click.argument("ckpt")
@click.argument("data")
@click.option("--split", default="test", show_default=True)
@click.option("--limit", type=int, default=None, help="only the first N samples")
@click.option("--out", default=None, help="also write the result JSON here")
def main(ckpt: str, data: str, split: str, limit: int | None, out: str | None) -> None:
    from geogen.dataset import open_split

    torch.set_num_threads(2)
    t0 = time.time()
    try:
        model = checkpoint.load(ckpt)
    except FlowcapsError as err:
        raise click.ClickException(str(err)) from None
    part = open_split(data, split)
    arrays = part.read(("frames", "amodal"), limit=limit)
    res = evaluate(model, arrays["frames"][:, 0], arrays["amodal"][:, 0], progress=True,
                   slots=part.slots)
    res.update({"checkpoint": ckpt, "data": data, "split": split, "n": int(len(arrays["frames"])),
                "seconds": round(time.time() - t0, 1)})
    text = json.dumps(res, indent=2)
    if out:
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        import os
        os.replace(tmp, out)
    click.echo(text)


if __name__ == "__main__":
    sys.exit(main())
