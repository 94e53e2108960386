# IoU per class against the shape colour and the number of shapes: python trend_colour.py CHECKPOINT DATA N
import sys, numpy as np, torch, flowcaps
from geogen.dataset import read_split
from masks import parse_test
ck, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(2)
M, A, d = parse_test(ck, data, n)
M = M > 0.5; gt = d["amodal"][:, 0]; F = d["frames"][:, 0].astype(float); V = d["visible"][:, 0]
print("bg colour sample", F[0, 0, 0], F[1, 0, 0])
for j in range(3):
    sel = np.nonzero(d["present"][:, j])[0]
    p = M[sel, A[j]]; g = gt[sel, j]
    iou = (p & g).sum((1, 2)) / np.maximum((p | g).sum((1, 2)), 1)
    col = np.array([F[i][V[i] == j + 1].mean(0) if (V[i] == j + 1).any() else np.full(3, np.nan) for i in sel])
    key = [tuple(np.round(c / 255).astype(int)) for c in col]
    npres = d["present"][sel].sum(1)
    print(f"slot{j} mean {iou.mean():.3f}")
    for k in sorted(set(key)):
        w = np.array([kk == k for kk in key]); print(f"   colour~{k}: n={w.sum()} IoU {iou[w].mean():.3f}")
    for k in (1, 2, 3):
        w = npres == k
        if w.any(): print(f"   {k} shapes: n={w.sum()} IoU {iou[w].mean():.3f}")
    lo = np.argsort(iou)[:8]; print("   worst", [(int(sel[i]), round(float(iou[i]), 3)) for i in lo])
