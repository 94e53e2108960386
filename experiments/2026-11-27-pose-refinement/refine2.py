# Refinement sweeps: only pixels within R px of an image edge enter the appearance loss (R < 0:
# every pixel); SCHED cos (cosine step decay, RefineConfig's) or const.
# usage: refine2.py CHECKPOINT DATA N STEPS LR R [SCHED]
import sys, os, time, json, numpy as np, torch, flowcaps
from flowcaps import geometry
from flowcaps.losses import appearance_loss
from flowcaps.refine import edge_band
from geogen.dataset import read_split
from benchmark.metrics import SegmentationScore
ck, data, n, steps, lr, R = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
sched_kind = sys.argv[7] if len(sys.argv) > 7 else "cos"
torch.set_num_threads(int(os.environ.get("TH", 2)))
m = flowcaps.load(ck); m.eval()
for p in m.parameters(): p.requires_grad_(False)
d = read_split(data, "test", ("frames", "amodal", "visible", "present"), limit=n)
H = d["frames"].shape[2]
sc0 = SegmentationScore(K=m.config.num_capsules); sc1 = SegmentationScore(K=m.config.num_capsules)
t0 = time.time(); B = 100; npts = []
grid = geometry.pixel_centres(H, H)  # (HW, 2)
for i in range(0, n, B):
    img = torch.from_numpy(d["frames"][i:i+B, 0]).permute(0, 3, 1, 2).float() / 255  # (B, 3, H, W)
    b = img.shape[0]
    u = grid.expand(b, -1, -1)
    with torch.no_grad():
        shape, pose, depth = m.encode(img)
        pm = m.masks_at(shape, pose, depth, u)
    sc0.update(pm.masks.view(b, -1, H, H).numpy(), pm.visible.view(b, -1, H, H).numpy(),
               d["amodal"][i:i+B, 0], d["visible"][i:i+B, 0], d["present"][i:i+B])
    band = edge_band(img, R) if R >= 0 else torch.ones(b, H * H, dtype=torch.bool)  # (B, HW)
    P = int(band.sum(1).max()); npts.append(band.sum(1).float().mean().item())
    order = torch.sort(band.float(), dim=1, descending=True, stable=True).indices[:, :P]  # (B, P)
    wgt = band.gather(1, order).float()  # (B, P)
    ub = grid[order]  # (B, P, 2)
    tgt = img.flatten(2).gather(2, order[:, None].expand(-1, 3, -1))  # (B, 3, P)
    p = pose.clone().requires_grad_(True)
    opt = torch.optim.Adam([p], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for it in range(steps):
        pmb = m.masks_at(shape, p, depth, ub)
        loss = appearance_loss(pmb.visible, tgt, wgt)
        opt.zero_grad(); loss.backward(); opt.step()
        if sched_kind == "cos": sched.step()
    with torch.no_grad():
        pm = m.masks_at(shape, p, depth, u)
    sc1.update(pm.masks.view(b, -1, H, H).numpy(), pm.visible.view(b, -1, H, H).numpy(),
               d["amodal"][i:i+B, 0], d["visible"][i:i+B, 0], d["present"][i:i+B])
for nm, sc in (("base", sc0), ("refined", sc1)):
    print(nm, json.dumps(sc.compute()))
print(f"{time.time()-t0:.0f}s mean band px {np.mean(npts):.0f}")
