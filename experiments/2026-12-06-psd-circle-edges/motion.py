"""Each part's per-image IoU against the size of the local motion its dimension must carry
(the circle: its flow; a child: its flow minus the circle's), in bins.

    python experiments/2026-12-06-psd-circle-edges/motion.py CHECKPOINT DATA [PAIRS [ACTIVE_FROM]]

ACTIVE_FROM: another checkpoint of the same run whose active dimensions to use (a stage-1
state has none chosen yet; stage 2 keeps the motion encoder, so the dimensions agree).
"""
import sys

import numpy as np
from edges import masks_on_test  # this folder's edges.py (the script's folder is on sys.path)
from scipy.optimize import linear_sum_assignment

from benchmark.metrics import iou_matrix, slot_masks
from geogen.schema import SLOTS


def main(ckpt: str, data: str, pairs: int, active_from: str | None) -> None:
    masks, t = masks_on_test(ckpt, data, pairs, active_from)
    on = masks > 0.5  # (N, A, H, W)
    vis, fl = t["visible"], t["flow"]  # (N, H, W), (N, H, W, 2)
    gt = slot_masks(vis)  # (N, S, H, W)
    seen = gt.sum((2, 3)) >= 20  # (N, S) parts large enough to score
    iou = np.where(seen[:, None], iou_matrix(on, gt), np.nan).transpose(2, 1, 0)  # (S, A, N)
    rows, cols = linear_sum_assignment(-np.nanmean(iou, 2))
    for s, a in zip(rows, cols):
        size, score = [], []
        for i in range(pairs):
            g = vis[i] == s + 1
            if np.isnan(iou[s, a, i]):
                continue
            own = np.median(fl[i][g], 0)  # (2,)
            c = vis[i] == 1
            if s > 0 and c.sum() >= 5:
                own = own - np.median(fl[i][c], 0)
            size.append(np.abs(own).max())
            score.append(iou[s, a, i])
        size, score = np.array(size), np.array(score)
        edges = [0, 0.25, 0.5, 1, 2, 100]
        parts = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            sel = (size >= lo) & (size < hi)
            if sel.any():
                parts.append(f"[{lo}, {hi}) px: {score[sel].mean():.2f} ({sel.mean():.2f} of images)")
        print(f"{SLOTS[s]}: per-image IoU by its local motion's largest component: " + "; ".join(parts))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 300,
         sys.argv[4] if len(sys.argv) > 4 else None)
