"""Where a FlowCapsules checkpoint's flow error lies: by distance from the shapes, and whose it is.

On the first N test pairs (frame 0 -> 1) it splits the end-point error by each pixel's distance
from the ground-truth foreground (0 = on a shape), and gives each capsule's mean visibility in
the 3-8 px band around the shapes and on the background beyond, with its mean amodal area.

    python flow_bands.py CHECKPOINT DATA [--pairs 200] [--out bands.json]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from scipy.ndimage import distance_transform_edt

from flowcaps import checkpoint
from geogen.dataset import read_split
from geogen.schema import BACKGROUND

BANDS = ((0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (9, None))  # px from the foreground, inclusive
BATCH = 50


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("data")
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = checkpoint.load(args.checkpoint).eval()
    d = read_split(args.data, "test", ("frames", "flow", "visible"), limit=args.pairs)
    frames, n = d["frames"], len(d["frames"])
    flow, vis, masks = [], [], []
    for i in range(0, n, BATCH):
        flow.append(model.flow(frames[i:i + BATCH, 0], frames[i:i + BATCH, 1]).numpy())
        caps = model.parse(frames[i:i + BATCH, 0])
        vis.append(caps.visible.numpy())
        masks.append(caps.masks.numpy())
    pred = np.moveaxis(np.concatenate(flow), 1, -1)  # (N, H, W, 2)
    vis_k, masks_k = np.concatenate(vis), np.concatenate(masks)  # (N, K, H, W)
    epe = np.sqrt(((pred - d["flow"][:, 0]) ** 2).sum(-1))  # (N, H, W)
    speed = np.sqrt((pred ** 2).sum(-1))  # (N, H, W)
    # distance of each pixel from the nearest foreground pixel, 0 on the foreground
    dist = np.stack([distance_transform_edt(v == BACKGROUND) for v in d["visible"][:, 0]])  # (N, H, W)
    out = {"checkpoint": args.checkpoint, "pairs": n, "epe_all": float(epe.mean()), "bands": []}
    for lo, hi in BANDS:
        m = (dist >= lo) & (dist <= (np.inf if hi is None else hi))
        out["bands"].append({"px": [lo, hi], "pixels": float(m.mean()),
                             "share_of_error": float(epe[m].sum() / epe.sum()),
                             "epe": float(epe[m].mean()), "pred_speed": float(speed[m].mean())})
    near, far = (dist >= 3) & (dist <= 8), dist > 8
    out["capsules"] = [{"near": float(vis_k[:, k][near].mean()), "far": float(vis_k[:, k][far].mean()),
                        "area_px": float((masks_k[:, k] > 0.5).sum((1, 2)).mean())}
                       for k in range(vis_k.shape[1])]
    out["visible_near"] = float(vis_k.sum(1)[near].mean())
    out["visible_far"] = float(vis_k.sum(1)[far].mean())
    print(f"{args.checkpoint}: EPE over all pixels {out['epe_all']:.3f} px ({n} test pairs)")
    print("px from the shapes | pixels | share of the error | EPE | predicted speed (px)")
    for b in out["bands"]:
        lo, hi = b["px"]
        print(f"  {lo}-{'' if hi is None else hi:<3} | {b['pixels']:.3f} | {b['share_of_error']:.3f}"
              f" | {b['epe']:.2f} | {b['pred_speed']:.2f}")
    print("capsule | visibility 3-8 px from the shapes | beyond 8 px | mean amodal area (px)")
    for k, c in enumerate(out["capsules"]):
        print(f"  {k} | {c['near']:.3f} | {c['far']:.3f} | {c['area_px']:.0f}")
    print(f"  all | {out['visible_near']:.3f} | {out['visible_far']:.3f} |")
    if args.out:
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=2) + "\n")
        tmp.replace(args.out)


if __name__ == "__main__":
    main()
