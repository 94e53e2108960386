# refine variant: layer colours from flat band pixels only (no edge mixing), loss on the band.
import sys, os, math, json, time, numpy as np, torch, torch.nn.functional as F, flowcaps
from flowcaps import geometry
from flowcaps.refine import edge_band
from geogen.dataset import read_split
from benchmark.metrics import SegmentationScore
torch.set_num_threads(int(os.environ.get("TH", 1)))
ck, data, n, steps, lr, R, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
m = flowcaps.load(ck); m.eval()
for p in m.parameters(): p.requires_grad_(False)
d = read_split(data, "test", ("frames", "amodal", "visible", "present"), limit=n)
H = 64; grid = geometry.pixel_centres(H, H)
sc1 = SegmentationScore(K=8); t0 = time.time(); areas = []
def loss_fn(vis, tgt, wl, wc):
    layers = torch.cat([vis, (1 - vis.sum(1, keepdim=True)).clamp_min(0)], 1)  # (B, K+1, P)
    lc = layers * wc[:, None]
    colour = torch.einsum("bkp,bcp->bkc", lc, tgt) / lc.sum(2)[..., None].clamp_min(1e-6)
    recon = torch.einsum("bkp,bkc->bcp", layers, colour)
    return (((recon - tgt) ** 2).sum(1) * wl).mean()
for i in range(0, n, 50):
    img = torch.from_numpy(d["frames"][i:i+50, 0]).permute(0, 3, 1, 2).float() / 255
    b = img.shape[0]
    with torch.no_grad(): shape, pose, depth = m.encode(img)
    band = edge_band(img, R); edge = edge_band(img, 1)
    P = int(band.sum(1).max())
    order = torch.sort(band.float(), dim=1, descending=True, stable=True).indices[:, :P]
    wl = band.gather(1, order).float()
    flat = (band & ~edge).gather(1, order).float()
    wc = flat if mode == "flat" else wl
    u = grid[order]; tgt = img.flatten(2).gather(2, order[:, None].expand(-1, 3, -1))
    x = pose.clone().requires_grad_(True); opt = torch.optim.Adam([x], lr=lr)
    for s in range(steps):
        for g in opt.param_groups: g["lr"] = lr * 0.5 * (1 + math.cos(math.pi * s / steps))
        pm = m.masks_at(shape, x, depth, u)
        (gr,) = torch.autograd.grad(loss_fn(pm.visible, tgt, wl, wc), x); x.grad = gr; opt.step()
    with torch.no_grad(): pm = m.masks_at(shape, x.detach(), depth, grid.expand(b, -1, -1))
    sc1.update(pm.masks.view(b, -1, H, H).numpy(), pm.visible.view(b, -1, H, H).numpy(),
               d["amodal"][i:i+50, 0], d["visible"][i:i+50, 0], d["present"][i:i+50])
    areas.append((pm.masks.view(b, -1, H, H).numpy() > 0.5))
r = sc1.compute(); A = sc1.assignment(); M = np.concatenate(areas)
gt = d["amodal"][:, 0]; pres = d["present"]
ar = [ (M[pres[:, j], A[j]].sum() / gt[pres[:, j], j].sum()) for j in range(3)]
print(mode, "refined", json.dumps(r))
print("area ratios", np.round(ar, 4), f"{time.time()-t0:.0f}s")
