"""What a perfect segmenter with interchangeable groups scores under the fixed assignment.

An oracle hands each visible part of a test pair its exact visible mask as one group, the
background another, and leaves the spare groups empty; the groups are then put in the order
R-NEM's adapter uses (largest share of the image first), or in a random order (groups with no
order at all). The benchmark's `SegmentationScore` scores both. Usage:

    python oracle.py DATA [K] [LIMIT]
"""
import sys

import numpy as np

from benchmark.metrics import SegmentationScore, slot_masks
from geogen.dataset import read_split

root = sys.argv[1]
K = int(sys.argv[2]) if len(sys.argv) > 2 else 5
limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
test = read_split(root, "test", ("visible", "amodal", "present"), limit)
vis = test["visible"][:, 0]  # (N, H, W) label map
amodal = test["amodal"][:, 0]  # (N, S, H, W)
present = test["present"]  # (N, S)
S = amodal.shape[1]
rng = np.random.default_rng(0)
scores = {"by share": SegmentationScore(K=K), "random order": SegmentationScore(K=K),
          "shape order (a fixed group per shape)": SegmentationScore(K=K)}
for i in range(0, len(vis), 500):
    v = vis[i:i + 500]
    parts = slot_masks(v, S)  # (B, S, H, W)
    bg = (v == 0)[:, None]  # (B, 1, H, W)
    spare = np.zeros((len(v), K - S - 1) + v.shape[1:], bool)
    groups = np.concatenate([parts, bg, spare], 1).astype(np.float32)  # (B, K, H, W)
    share = groups.reshape(len(v), K, -1).sum(-1)  # (B, K)
    orders = {"by share": np.argsort(-share, axis=1, kind="stable"),
              "random order": np.argsort(rng.random(share.shape), axis=1),
              "shape order (a fixed group per shape)": np.tile(np.arange(K), (len(v), 1))}
    for name, order in orders.items():
        g = np.take_along_axis(groups, order[:, :, None, None], 1)  # (B, K, H, W)
        scores[name].update(g, g, amodal[i:i + 500], v, present[i:i + 500])
for name, sc in scores.items():
    out = sc.compute()
    vi = out["visible_iou"]
    print(f"{name}: visible IoU fixed all {vi['all']:.3f} (" +
          ", ".join(f"{s} {vi[s]:.3f}" for s in out["count"]) +
          f"), per image {out['visible_iou_per_image']['all']:.3f}")
