# Area bias per class: predicted amodal area (prob > thr) over GT area, and IoU at a few thresholds.
import sys, numpy as np, torch
sys.path.insert(0, "experiments/2026-11-26-long-finetune-probes")  # run from the repository root
from masks import parse_test
torch.set_num_threads(2)
data, n = sys.argv[1], int(sys.argv[2])
for ck in sys.argv[3:]:
    M, A, d = parse_test(ck, data, n)
    gt = d["amodal"][:, 0]; pres = d["present"]
    out = []
    for j, nm in enumerate(["circ", "sq", "tri"]):
        i = np.nonzero(pres[:, j])[0]; g = gt[i, j]; p = M[i, A[j]]
        r = (p > 0.5).sum((1, 2)).sum() / g.sum((1, 2)).sum()
        ious = [((p > t) & g).sum((1, 2)) / ((p > t) | g).sum((1, 2)) for t in (0.3, 0.4, 0.5)]
        out.append(f"{nm} area {r:.4f} iou@.3/.4/.5 " + "/".join(f"{x.mean():.4f}" for x in ious))
    print(ck, " | ".join(out), flush=True)
