"""Per capsule, against each class: mean amodal IoU, mean visible IoU, mean amodal probability
inside the ground-truth amodal mask, mean visibility inside the ground-truth visible region, and
how often the capsule is the image's best amodal match; then the fixed and per-image scores
(benchmark.metrics.SegmentationScore, assignment chosen on these pairs). Frame 0 of the first N
test pairs.

    python results/overlap-2026-11-27/dupes.py CHECKPOINT DATA [N]
"""
import sys
import numpy as np
import torch
import flowcaps
from geogen.dataset import read_split
from benchmark.metrics import iou_matrix, visible_masks, slot_masks, THRESHOLD
SLOTS = ("circle", "square", "triangle")
ck, data = sys.argv[1], sys.argv[2]; n = int(sys.argv[3]) if len(sys.argv) > 3 else 500
torch.set_num_threads(2)
model = flowcaps.load(ck, device="cpu").eval()
t = read_split(data, "test", ("frames", "visible", "amodal", "present"), limit=n)
images = torch.from_numpy(t["frames"][:, 0].transpose(0, 3, 1, 2).astype(np.float32) / 255)
with torch.no_grad():
    caps = model.parse(images)
m = caps.masks.numpy(); vis = caps.visible.numpy(); depth = caps.depth.numpy()  # (B,K,H,W),(B,K)
gt_a = t["amodal"][:, 0]; gt_v = t["visible"][:, 0]; pres = t["present"].astype(bool)
ia = iou_matrix(m > THRESHOLD, gt_a)  # (B,K,S)
iv = iou_matrix(visible_masks(vis), slot_masks(gt_v))
K = m.shape[1]
rank = (-depth).argsort(1).argsort(1)  # 0 = front-most
area = (m > THRESHOLD).sum((2, 3))  # (B,K)
print(ck, data, n)
print("capsule mean amodal area (px):", " ".join(f"{a:.0f}" for a in area.mean(0)))
print("capsule mean depth rank (0 front):", " ".join(f"{r:.1f}" for r in rank.mean(0)))
for s, name in enumerate(SLOTS):
    sel = pres[:, s]
    A = gt_a[sel, s]; V = gt_v[sel] == s + 1
    best = ia[sel][:, :, s].argmax(1)
    print(f"{name} ({sel.sum()} images)")
    print("  amodal IoU   ", " ".join(f"{x:.3f}" for x in ia[sel][:, :, s].mean(0)))
    print("  visible IoU  ", " ".join(f"{x:.3f}" for x in iv[sel][:, :, s].mean(0)))
    print("  Lambda in gt ", " ".join(f"{(m[sel][:, k] * A).sum() / A.sum():.3f}" for k in range(K)))
    print("  vis in gt vis", " ".join(f"{(vis[sel][:, k] * V).sum() / max(V.sum(), 1):.3f}" for k in range(K)))
    print("  best (share) ", " ".join(f"{x:.3f}" for x in np.bincount(best, minlength=K) / sel.sum()))
from benchmark.metrics import SegmentationScore
sc = SegmentationScore(K)
sc.update(m, vis, gt_a, gt_v, pres)
r = sc.compute()
f = lambda d: " ".join(f"{k} {v:.3f}" for k, v in d.items())
print("fixed amodal:", f(r["amodal_iou"]), "| per image:", f(r["amodal_iou_per_image"]))
print("fixed visible:", f(r["visible_iou"]), "| assignment", r["assignment"])
