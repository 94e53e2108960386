"""Where a PSD checkpoint's part masks fall short of the visible parts: each part's mask by
distance from the part's visible edge, what its mask covers besides the part, and the circle's
edge next to the background against next to a child.

    python experiments/2026-12-06-psd-circle-edges/edges.py CHECKPOINT DATA [PAIRS]

The parts are matched to the active dimensions by the largest mean IoU (one to one).
"""
import sys

import numpy as np
import torch
from scipy import ndimage
from scipy.optimize import linear_sum_assignment

from baselines.psd import checkpoint
from benchmark.metrics import iou_matrix, slot_masks
from geogen.dataset import open_split
from geogen.schema import SLOTS


def masks_on_test(ckpt: str, data: str, pairs: int, active_from: str | None = None):
    """The active dimensions' masks (N, A, H, W) on the first test pairs, and those pairs
    (frames, flow, visible at frame 0). active_from: a checkpoint whose active set to use."""
    torch.set_num_threads(1)
    model = checkpoint.load(ckpt)
    if active_from:
        model.active.copy_(checkpoint.load(active_from).active)
    model.eval()
    t = open_split(data, "test").read(("frames", "flow", "visible"), pairs,
                                      t={"frames": 0, "flow": 0, "visible": 0})
    img = torch.from_numpy(t["frames"]).permute(0, 3, 1, 2).float() / 255  # (N, 3, H, W)
    flow = torch.from_numpy(t["flow"].astype(np.float32)).permute(0, 3, 1, 2)  # (N, 2, H, W)
    with torch.inference_mode():
        mean, _ = model.encode(flow)  # (N, D)
        local = model.local_motions(img, mean)  # (N, 2, D, H, W)
        masks = model.masks(local[:, :, model.active]).numpy()  # (N, A, H, W)
    return masks, t


def main(ckpt: str, data: str, pairs: int) -> None:
    masks, t = masks_on_test(ckpt, data, pairs)
    vis = t["visible"]  # (N, H, W): 0 background, 1 + slot
    on = masks > 0.5  # (N, A, H, W)
    gt = slot_masks(vis)  # (N, S, H, W)
    per = iou_matrix(on, gt)  # (N, A, S) per image
    present = gt.any((2, 3))  # (N, S)
    iou = np.stack([per[present[:, s], :, s].mean(0) for s in range(len(SLOTS))])  # (S, A)
    rows, cols = linear_sum_assignment(-iou)
    dim = dict(zip(rows, cols))
    for s, name in enumerate(SLOTS):
        if s not in dim:
            continue
        a, prof, other, bg = dim[s], {}, [], []
        for i in range(pairs):
            g = vis[i] == s + 1
            if g.sum() < 20:
                continue
            d = ndimage.distance_transform_edt(g)
            for b in range(1, 6):
                sel = (d >= b) & (d < b + 1)
                if sel.any():
                    prof.setdefault(b, []).append(masks[i, a][sel].mean())
            p = on[i, a]
            other.append((p & (vis[i] > 0) & ~g).sum() / max(p.sum(), 1))
            bg.append((p & (vis[i] == 0)).sum() / max(p.sum(), 1))
        print(f"{name}: IoU {iou[s, a]:.3f}; mask by distance from the visible edge (px) "
              + ", ".join(f"{b}: {np.mean(v):.2f}" for b, v in prof.items())
              + f"; share of the mask on other parts {np.mean(other):.3f}, on background "
              f"{np.mean(bg):.3f}")
    a = dim[0]  # the circle: Geo's parent, whose visible edge meets both the background and children
    child, back = [], []
    for i in range(pairs):
        g = vis[i] == 1
        if g.sum() < 20:
            continue
        edge = g & ~ndimage.binary_erosion(g)
        near_child = edge & ndimage.binary_dilation(vis[i] > 1)
        near_back = edge & ndimage.binary_dilation(vis[i] == 0)
        if near_child.any():
            child.append(masks[i, a][near_child].mean())
        if near_back.any():
            back.append(masks[i, a][near_back].mean())
    print(f"circle edge pixels next to a child {np.mean(child):.2f}, next to the background "
          f"{np.mean(back):.2f}")
    seen = gt[:, 0].sum((1, 2)) >= 20  # (N,) images with a circle to score
    per_image = per[seen, a, 0]
    peaks = masks[seen, a].reshape(seen.sum(), -1).argmax(1)  # (n,)
    peak_off = vis[seen].reshape(seen.sum(), -1)[np.arange(seen.sum()), peaks] != 1
    print("circle per-image IoU quantiles 0.05/0.1/0.25/0.5/0.75: "
          + " / ".join(f"{q:.2f}" for q in np.quantile(per_image, [0.05, 0.1, 0.25, 0.5, 0.75]))
          + f"; under 0.3 in {np.mean(per_image < 0.3):.3f} of the images; its mask's peak off "
          f"the circle in {peak_off.sum()} images (IoU there {per_image[peak_off].mean():.2f}, "
          f"elsewhere {per_image[~peak_off].mean():.2f})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 300)
