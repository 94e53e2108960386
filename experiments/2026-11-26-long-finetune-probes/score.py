# Where the fixed-assignment masks go wrong: python score.py CHECKPOINT DATA N (first N test pairs, frame 0).
# IoU at thresholds 0.3-0.7, mean drawn area, false positive and missed pixels per mask, IoU spread.
import sys, numpy as np, torch, flowcaps
from geogen.dataset import read_split
from masks import parse_test
ck, data = sys.argv[1], sys.argv[2]; n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
torch.set_num_threads(2)
M, A, d = parse_test(ck, data, n)
gt = d["amodal"][:, 0]; pres = d["present"]
print("assignment", A)
for j in range(gt.shape[1]):
    sel = pres[:, j].astype(bool)
    if not sel.any(): continue
    p = M[sel, A[j]]; g = gt[sel, j] > 0
    line = [f"slot{j} n={sel.sum()}"]
    for t in (0.3, 0.4, 0.5, 0.6, 0.7):
        b = p > t; inter = (b & g).sum((1, 2)); uni = (b | g).sum((1, 2))
        line.append(f"t{t}:{(inter/np.maximum(uni,1)).mean():.3f}")
    b = p > 0.5
    fp = (b & ~g).sum((1, 2)); fn = (~b & g).sum((1, 2)); area = g.sum((1, 2))
    line.append(f"area {area.mean():.0f} pred {b.sum((1,2)).mean():.0f} fp {fp.mean():.1f} fn {fn.mean():.1f}")
    iou = (b & g).sum((1,2)) / np.maximum((b | g).sum((1,2)), 1)
    line.append(f"frac<.5 {np.mean(iou<.5):.3f} frac<.8 {np.mean(iou<.8):.3f} median {np.median(iou):.3f}")
    print(" ".join(line))
