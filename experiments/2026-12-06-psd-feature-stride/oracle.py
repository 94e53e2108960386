"""How well a mask can score when it is drawn at a coarser grid: each visible part's true mask
area-averaged to 1/f of the side, upsampled back (bilinear or bicubic, as torch's
interpolate), over its maximum and thresholded at 1/2 (PSD's rule), against the true mask.

    python experiments/2026-12-06-psd-feature-stride/oracle.py DATA [PAIRS]

A linear upsampling is the pessimistic case: the motion decoder's nonlinearities may sharpen.
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

from benchmark.metrics import iou_matrix
from geogen.dataset import open_split
from geogen.schema import SLOTS


def main(data: str, pairs: int) -> None:
    torch.set_num_threads(1)
    t = open_split(data, "test").read(("visible",), pairs, t={"visible": 0})
    vis = torch.from_numpy(t["visible"].astype(np.int64))  # (N, H, W): 0 background, 1 + slot
    side = vis.shape[-1]
    for s, name in enumerate(SLOTS):
        g = (vis == s + 1).float()[:, None]  # (N, 1, H, W)
        seen = g.flatten(1).sum(1) >= 20
        row = [name]
        for f in (2, 4):
            small = F.avg_pool2d(g, f)  # (N, 1, H/f, W/f)
            for mode in ("bilinear", "bicubic"):
                up = F.interpolate(small, size=side, mode=mode, align_corners=False)
                on = up / up.flatten(1).amax(1).clamp_min(1e-6)[:, None, None, None] > 0.5
                iou = iou_matrix(on.numpy(), g.numpy() > 0)[:, 0, 0]  # (N,)
                row.append(f"1/{f} {mode} {iou[seen.numpy()].mean():.3f}")
        print(" | ".join(row))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
