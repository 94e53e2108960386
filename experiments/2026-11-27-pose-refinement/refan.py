# Per-instance IoU before/after refinement, by class, with how hidden each shape is.
import sys, os, numpy as np, torch, flowcaps
sys.path.insert(0, "experiments/2026-11-26-long-finetune-probes")  # run from the repository root
from masks import parse_test
from flowcaps.config import RefineConfig
torch.set_num_threads(int(os.environ.get("TH", 1)))
ck, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = RefineConfig(**{k: type(getattr(RefineConfig(), k))(v) for k, v in (a.split("=") for a in sys.argv[4:])})
M0, A, d = parse_test(ck, data, n)
m = flowcaps.load(ck); m.eval()
out = []
for i in range(0, n, 50):
    img = torch.from_numpy(d["frames"][i:i+50, 0]).permute(0, 3, 1, 2).float() / 255
    out.append(flowcaps.parse_refined(m, img, cfg).masks.numpy())
M1 = np.concatenate(out)
gt = d["amodal"][:, 0]; vis = d["visible"][:, 0]; pres = d["present"]
np.savez(os.environ.get("OUTNPZ", "runs/refan.npz"), M0=M0, M1=M1, A=A)
for j, nm in enumerate(["circle", "square", "triangle"]):
    i = np.nonzero(pres[:, j])[0]; g = gt[i, j]
    hid = 1 - (vis[i] == j + 1).sum((1, 2)) / g.sum((1, 2))
    r = []
    for M in (M0, M1):
        p = M[i, A[j]] > 0.5
        r.append(((p & g).sum((1, 2)) / (p | g).sum((1, 2))))
    print(f"{nm} n={len(i)} base {r[0].mean():.4f} ref {r[1].mean():.4f} | ref quantiles 5/25/50/75% "
          + " ".join(f"{q:.3f}" for q in np.percentile(r[1], [5, 25, 50, 75])))
    for lo, hi in ((0, .01), (.01, .2), (.2, .5), (.5, 1.01)):
        s = (hid >= lo) & (hid < hi)
        if s.any(): print(f"   hidden {lo:.2f}-{hi:.2f}: n={s.sum()} base {r[0][s].mean():.4f} ref {r[1][s].mean():.4f}")
    w = np.argsort(r[1])[:6]
    print("   worst:", [(int(i[x]), round(float(r[0][x]), 3), round(float(r[1][x]), 3), round(float(hid[x]), 2)) for x in w])
    # area ratio after refinement
    p = M1[i, A[j]] > 0.5
    print(f"   area ratio ref {p.sum() / g.sum():.4f}  base {(M0[i, A[j]] > 0.5).sum() / g.sum():.4f}")
