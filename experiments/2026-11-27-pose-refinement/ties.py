# Tie pixels: 4x4-subsample coverage exactly 1/2. The GT counts them in (">= half covered");
# the image shows them half-way between the shape and what lies behind, so a mask that reads
# coverage from the image sits at ~0.5 there and the "> 0.5" threshold drops them at random.
import sys
import numpy as np
from geogen.dataset import read_split
from geogen.render import signed_distance, _to_canonical, pixel_centres, _subsample_offsets
from geogen import schema
z = np.load(sys.argv[1] if len(sys.argv) > 1 else "runs/refan.npz"); M0, M1, A = z["M0"], z["M1"], z["A"]; n = len(M0)
d = read_split("data/geo-gpu", "test", ("amodal", "present", "pose"), limit=n)
xy = pixel_centres(64).reshape(-1, 2); off = _subsample_offsets(4)
sub = (xy[:, None, :] + off[None]).reshape(-1, 2)
for j, kind in enumerate(schema.SLOTS):
    i = np.nonzero(d["present"][:, j])[0]
    cov = np.stack([(signed_distance(kind, _to_canonical(d["pose"][x, 0, j], sub)) < 0).reshape(4096, -1).mean(1).reshape(64, 64) for x in i])
    g = d["amodal"][i, 0, j]
    assert np.array_equal(g, cov >= 0.5), "GT is coverage >= 1/2"
    tie = cov == 0.5
    print(f"{kind}: tie pixels {tie.sum() / g.sum():.4f} of GT area, {tie.sum((1, 2)).astype(bool).mean():.2f} of shapes have some")
    for nm, M in (("base", M0), ("refined", M1)):
        p = M[i, A[j]] > 0.5
        iou = ((p & g).sum((1, 2)) / (p | g).sum((1, 2))).mean()
        nt = (p | tie) ; iou_t = ((nt & g).sum((1, 2)) / (nt | g).sum((1, 2))).mean()
        print(f"   {nm}: ties kept {(p & tie).sum() / tie.sum():.3f}; IoU {iou:.4f}, with every tie pixel counted in {iou_t:.4f}; "
              f"misses off ties {((g & ~p & ~tie).sum() / g.sum()):.4f} of GT area, false pixels {((p & ~g).sum() / g.sum()):.4f}")
