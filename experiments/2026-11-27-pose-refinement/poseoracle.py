# Pose oracle: with the learned shape of each slot's capsule fixed, fit the 4 pose numbers per
# instance to the GT amodal mask; IoU then bounds what better pose regression alone could give.
import sys, numpy as np, torch, flowcaps
sys.path.insert(0, "results/long-finetune-2026-11-26")  # run from the repository root
from masks import parse_test
from flowcaps import geometry
ck, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 2)
M, A, d = parse_test(ck, data, n)
m = flowcaps.load(ck); m.eval()
for p in m.parameters(): p.requires_grad_(False)
gt = d["amodal"][:, 0]; pres = d["present"]
H = gt.shape[-1]
u = geometry.pixel_centres(H, H)[None]  # (1, H*W, 2)
names = ["circle", "square", "triangle"]
for j in range(gt.shape[1]):
    idx = np.nonzero(pres[:, j])[0]
    k = A[j]
    imgs = torch.from_numpy(d["frames"][idx, 0]).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():
        shape, pose, depth = m.encode(imgs)
    s = shape[:, k:k+1]; p0 = pose[:, k:k+1].clone()
    g = torch.from_numpy(gt[idx, j]).float().view(len(idx), 1, -1)  # (N, 1, HW)
    def logit(p):
        v = geometry.to_canonical(p, u.expand(len(idx), -1, -1))
        return m.decoder(s, v).float()
    def iou(p, thr=0.5):
        with torch.no_grad():
            b = torch.sigmoid(logit(p)) > thr
        gg = g > 0.5
        return ((b & gg).sum(-1) / (b | gg).sum(-1).clamp(min=1)).squeeze(1)
    base = iou(p0)
    p = p0.clone().requires_grad_(True)
    opt = torch.optim.Adam([p], lr=3e-3)
    for it in range(300):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logit(p), g)
        opt.zero_grad(); loss.backward(); opt.step()
    fit = iou(p.detach())
    dp = (p.detach() - p0)[:, 0]
    print(f"{names[j]} n={len(idx)} base {base.mean():.4f} pose-fit {fit.mean():.4f} "
          f"| |dt| px {(dp[:, :2].norm(dim=-1) * H / 2).mean():.3f} dangle {dp[:, 2].abs().mean():.4f} "
          f"dscale rel {(dp[:, 3] / p0[:, 0, 3]).mean():+.4f} (abs {(dp[:, 3] / p0[:, 0, 3]).abs().mean():.4f})")
    for thr in (0.3, 0.4, 0.5, 0.6):
        print(f"   thr {thr}: base {iou(p0, thr).mean():.4f} fit {iou(p.detach(), thr).mean():.4f}")
