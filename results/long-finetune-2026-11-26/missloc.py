# Where a checkpoint's missed pixels lie on squares/triangles: radius from the GT centroid,
# normalised per shape by its max boundary radius (corners ~1, edge middles lower).
import sys, numpy as np, torch, flowcaps
from geogen.dataset import read_split
from benchmark.metrics import SegmentationScore
from scipy import ndimage
ck, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(1)
m = flowcaps.load(ck); m.eval()
d = read_split(data, "test", ("frames", "amodal", "visible", "present"), limit=n)
sc = SegmentationScore(K=m.config.num_capsules); M = []
for i in range(0, n, 200):
    img = torch.from_numpy(d["frames"][i:i+200, 0]).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad(): c = m.parse(img)
    M.append(c.masks.numpy())
    sc.update(c.masks.numpy(), c.visible.numpy(), d["amodal"][i:i+200, 0], d["visible"][i:i+200, 0], d["present"][i:i+200])
M = np.concatenate(M); A = sc.assignment(); gt = d["amodal"][:, 0]; pres = d["present"]
yy, xx = np.mgrid[0:gt.shape[2], 0:gt.shape[3]]
for j in range(gt.shape[1]):
    bins = np.linspace(0, 1.05, 8); hfn = np.zeros(7); hb = np.zeros(7)
    for i in np.nonzero(pres[:, j])[0]:
        g = gt[i, j] > 0; b = M[i, A[j]] > 0.5
        cy, cx = yy[g].mean(), xx[g].mean()
        r = np.hypot(yy - cy, xx - cx)
        edge = g & ~ndimage.binary_erosion(g)
        rmax = r[edge].max()
        hfn += np.histogram(r[g & ~b] / rmax, bins)[0]
        hb += np.histogram(r[edge] / rmax, bins)[0]
    print(f"slot{j} r/rmax bins {np.round(bins[1:],2)}")
    print("  missed  ", hfn.astype(int), "\n  boundary", hb.astype(int), "\n  miss/boundary", np.round(hfn / np.maximum(hb, 1), 2))
