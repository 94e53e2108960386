# Tie pixels: 4x4-subsample coverage exactly 1/2. The GT counts them in (">= half covered");
# the image shows them half-way between the shape and what lies behind, so a mask that reads
# coverage from the image sits at ~0.5 there and the "> 0.5" threshold drops them at random.
#   python ties.py MASKS.npz [DATA] [SUPERSAMPLE]   (MASKS.npz from refan.py; data/geo-gpu, 4)
import sys
import numpy as np
from geogen.dataset import read_split
from geogen.render import signed_distance, pixel_centres
from geogen import schema
from coverage import subsample_offsets, to_canonical



z = np.load(sys.argv[1] if len(sys.argv) > 1 else "runs/refan.npz"); M0, M1, A = z["M0"], z["M1"], z["A"]; n = len(M0)
data = sys.argv[2] if len(sys.argv) > 2 else "data/geo-gpu"
ss = int(sys.argv[3]) if len(sys.argv) > 3 else 4
d = read_split(data, "test", ("amodal", "present", "pose"), limit=n)
H = d["amodal"].shape[-1]
xy = pixel_centres(H).reshape(-1, 2); off = subsample_offsets(ss)
sub = (xy[:, None, :] + off[None]).reshape(-1, 2)
for j, kind in enumerate(schema.SLOTS):
    i = np.nonzero(d["present"][:, j])[0]
    cov = np.stack([(signed_distance(kind, to_canonical(d["pose"][x, 0, j], sub)) < 0).reshape(H * H, -1).mean(1).reshape(H, H) for x in i])
    g = d["amodal"][i, 0, j]
    assert np.array_equal(g, cov >= 0.5), "GT is coverage >= 1/2"
    tie = cov == 0.5
    print(f"{kind}: tie pixels {tie.sum() / g.sum():.4f} of GT area, {tie.sum((1, 2)).astype(bool).mean():.2f} of shapes have some")
    for nm, M in (("base", M0), ("refined", M1)):
        p = M[i, A[j]] > 0.5
        iou = ((p & g).sum((1, 2)) / (p | g).sum((1, 2))).mean()
        nt = (p | tie) ; iou_t = ((nt & g).sum((1, 2)) / (nt | g).sum((1, 2))).mean()
        print(f"   {nm}: ties kept {(p & tie).sum() / max(tie.sum(), 1):.3f}; IoU {iou:.4f}, with every tie pixel counted in {iou_t:.4f}; "
              f"misses off ties {((g & ~p & ~tie).sum() / g.sum()):.4f} of GT area, false pixels {((p & ~g).sum() / g.sum()):.4f}")
