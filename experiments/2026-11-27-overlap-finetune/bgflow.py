"""Flow error on the ground-truth background, and which capsule is visible there (frame 0 of the
first N test pairs).

    python experiments/2026-11-27-overlap-finetune/bgflow.py CHECKPOINT DATA N
"""
import sys, numpy as np, torch, flowcaps
from geogen.dataset import read_split
torch.set_num_threads(1)
ck, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = flowcaps.load(ck).eval()
t = read_split(data, "test", ("frames", "visible", "flow"), limit=n)
f = torch.from_numpy(t["frames"].transpose(0, 1, 4, 2, 3).astype(np.float32) / 255)
with torch.no_grad():
    flow = model.flow(f[:, 0], f[:, 1]).numpy().transpose(0, 2, 3, 1)  # (B,H,W,2)
    vis = model.parse(f[:, 0]).visible.numpy()
bg = t["visible"][:, 0] == 0
err = np.linalg.norm(flow - t["flow"][:, 0], axis=-1)
print(ck, "EPE bg %.2f fg %.2f; |pred flow| on bg %.2f; gt |flow| on bg %.2f" % (err[bg].mean(), err[~bg].mean(), np.linalg.norm(flow, axis=-1)[bg].mean(), np.linalg.norm(t["flow"][:, 0], axis=-1)[bg].mean()))
print("visibility on bg per capsule", " ".join("%.3f" % vis[:, k][bg].mean() for k in range(vis.shape[1])))
per = np.array([err[b][bg[b]].mean() for b in range(n)])
print("per-image bg EPE: median %.2f, share > 1 px %.2f, max %.1f" % (np.median(per), (per > 1).mean(), per.max()))
