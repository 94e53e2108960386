# Where a checkpoint's missed pixels lie on squares/triangles: radius from the GT centroid,
# normalised per shape by its max boundary radius (corners ~1, edge middles lower).
import sys, numpy as np, torch, flowcaps
from geogen.dataset import read_split
from masks import parse_test
from scipy import ndimage
ck, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(1)
M, A, d = parse_test(ck, data, n)
gt = d["amodal"][:, 0]; pres = d["present"]
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
