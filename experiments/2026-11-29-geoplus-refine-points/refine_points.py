"""`flowcaps.refine_poses` on the first N Geo+ test pairs at several `RefineConfig.points`.

Frame 0's poses are refined with frame 1 as the background layer (as `flowcaps-refine` does for
checkpoints trained with the "still" background), then frame 0's amodal masks are scored with
the fixed assignment chosen on the same pairs. Prints one line per setting and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from benchmark.metrics import SegmentationScore
from flowcaps import RefineConfig, geometry, refine_poses
from flowcaps.checkpoint import load
from geogen.dataset import read_split


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("data")
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--points", type=int, nargs="+", default=[1024, 0])
    ap.add_argument("--out")
    a = ap.parse_args()
    torch.set_flush_denormal(True)
    model = load(a.checkpoint)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    test = read_split(a.data, "test", ("frames", "amodal", "visible", "present"), limit=a.pairs)
    frames = np.ascontiguousarray(test["frames"].transpose(0, 1, 4, 2, 3), dtype=np.float32) / 255
    side, k = frames.shape[-1], model.config.num_capsules
    results = {}
    for points in [None] + a.points:  # None: the encoder's poses
        score, t0 = SegmentationScore(K=k), time.time()
        for lo in range(0, len(frames), a.batch):
            img0 = torch.from_numpy(frames[lo:lo + a.batch, 0])  # (B, 3, H, W)
            img1 = torch.from_numpy(frames[lo:lo + a.batch, 1])  # (B, 3, H, W)
            b = len(img0)
            with torch.no_grad():
                shape, pose, depth = model.encode(img0)
            if points is not None:
                pose = refine_poses(model, img0, shape, pose, depth, RefineConfig(points=points), img1)
            u = geometry.pixel_centres(side, side).expand(b, -1, -1)  # (B, H*W, 2)
            with torch.no_grad():
                pm = model.masks_at(shape, pose, depth, u)
            score.update(pm.masks.view(b, k, side, side).numpy(), pm.visible.view(b, k, side, side).numpy(),
                         test["amodal"][lo:lo + b, 0], test["visible"][lo:lo + b, 0],
                         test["present"][lo:lo + b].astype(bool))
        r = score.compute()
        name = "encoder" if points is None else f"points={points}"
        results[name] = {"seconds": time.time() - t0, **r}
        print(name, {c: round(v, 3) for c, v in r["amodal_iou"].items()}, "per image",
              round(r["amodal_iou_per_image"]["all"], 3), "visible", round(r["visible_iou"]["all"], 3),
              f"{time.time() - t0:.0f} s", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
