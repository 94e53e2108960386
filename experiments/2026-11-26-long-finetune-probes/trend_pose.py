# IoU per class against the true size and distance from the border (quintiles): python trend_pose.py CHECKPOINT DATA N
# Square/triangle IoU against the GT pose: rotation, scale, distance to the border.
import sys, numpy as np, torch, flowcaps
from geogen.dataset import read_split
from masks import parse_test
ck, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(2)
M, A, d = parse_test(ck, data, n, ("pose",))
M = M > 0.5; gt = d["amodal"][:, 0]; P = d["pose"][:, 0]
print("pose sample", P[0])
for j in range(3):
    sel = np.nonzero(d["present"][:, j])[0]
    p = M[sel, A[j]]; g = gt[sel, j]
    iou = (p & g).sum((1, 2)) / np.maximum((p | g).sum((1, 2)), 1)
    pose = P[sel, j]
    fold = {0: 1e9, 1: np.pi / 2, 2: 2 * np.pi / 3}[j]
    ang = np.mod(pose[:, 2], fold) if j else np.zeros(len(sel))
    area = g.sum((1, 2))
    border = np.array([min(np.nonzero(gg.any(1))[0].min(), 63 - np.nonzero(gg.any(1))[0].max(),
                           np.nonzero(gg.any(0))[0].min(), 63 - np.nonzero(gg.any(0))[0].max()) for gg in g])
    print(f"slot{j} mean {iou.mean():.3f}")
    for name, x in (("angle", ang), ("area", area), ("border", border)):
        if x.std() == 0: continue
        q = np.quantile(x, [0, .2, .4, .6, .8, 1])
        b = np.clip(np.searchsorted(q, x, side="right") - 1, 0, 4)
        print(f"  {name:6s} quintiles {np.round(q,2)} -> IoU {[round(float(iou[b==k].mean()),3) for k in range(5)]}")
    print(f"  corr(IoU, area) {np.corrcoef(iou, area)[0,1]:.2f}; touching border {np.mean(border==0):.3f} IoU there {iou[border==0].mean() if (border==0).any() else float('nan'):.3f}")
