# IoU per class against the shape colour and the number of shapes: python trend_colour.py CHECKPOINT DATA N
import sys, numpy as np, torch, flowcaps
from geogen.dataset import read_split
from benchmark.metrics import SegmentationScore
ck, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(2)
m = flowcaps.load(ck); m.eval()
d = read_split(data, "test", ("frames", "amodal", "visible", "present"), limit=n)
sc = SegmentationScore(K=m.config.num_capsules); M = []
for i in range(0, n, 200):
    img = torch.from_numpy(d["frames"][i:i+200, 0]).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad(): c = m.parse(img)
    M.append(c.masks.numpy())
    sc.update(c.masks.numpy(), c.visible.numpy(), d["amodal"][i:i+200, 0], d["visible"][i:i+200, 0], d["present"][i:i+200])
M = np.concatenate(M) > 0.5; A = sc.assignment(); gt = d["amodal"][:, 0]; F = d["frames"][:, 0].astype(float); V = d["visible"][:, 0]
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
