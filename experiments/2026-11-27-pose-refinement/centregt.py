# Score a checkpoint against GT made by the pixel-centre rule (centre inside the shape).
import sys, numpy as np, torch
sys.path.insert(0, "experiments/2026-11-26-long-finetune-probes")  # run from the repository root
from masks import parse_test
from geogen.render import signed_distance, pixel_centres
from geogen import schema
from coverage import to_canonical
torch.set_num_threads(2)
ck, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
M, A, d = parse_test(ck, data, n, extra=("pose",))
H = d["frames"].shape[2]; xy = pixel_centres(H).reshape(-1, 2)
pose = d["pose"][:, 0]; pres = d["present"]
for j, kind in enumerate(schema.SLOTS):
    i = np.nonzero(pres[:, j])[0]
    old = d["amodal"][i, 0, j]
    new = np.stack([(signed_distance(kind, to_canonical(pose[x, j], xy)) < 0).reshape(H, H) for x in i])
    p = M[i, A[j]] > 0.5
    io = ((p & old).sum((1, 2)) / (p | old).sum((1, 2))).mean()
    inw = ((p & new).sum((1, 2)) / (p | new).sum((1, 2))).mean()
    print(f"{kind}: old GT area/centre GT area {old.sum() / new.sum():.4f}; IoU old GT {io:.4f} centre GT {inw:.4f}; pred area/centre area {p.sum() / new.sum():.4f}")
