import sys, json, numpy as np, torch, flowcaps
from geogen.dataset import read_split
from benchmark.metrics import SegmentationScore, visible_masks
torch.set_num_threads(1)
ck = sys.argv[1]; n = 500
m = flowcaps.load(ck); m.eval()
d = read_split("data/geo-gpu", "test", ("frames", "amodal", "visible", "present"), limit=n)
sc = SegmentationScore(K=8); V = []; Ms = []
for i in range(0, n, 100):
    img = torch.from_numpy(d["frames"][i:i+100, 0]).permute(0, 3, 1, 2).float() / 255
    c = m.parse(img)
    sc.update(c.masks.numpy(), c.visible.numpy(), d["amodal"][i:i+100, 0], d["visible"][i:i+100, 0], d["present"][i:i+100])
    V.append(visible_masks(c.visible.numpy())); Ms.append(c.masks.numpy() > 0.5)
r = sc.compute(); print({k: {kk: round(vv, 3) for kk, vv in r[k].items()} for k in ("amodal_iou", "visible_iou")}, r["assignment"])
V = np.concatenate(V); M = np.concatenate(Ms); gv = d["visible"][:, 0]
A = sc.assignment()
for j in range(3):
    i = np.nonzero(d["present"][:, j])[0]
    g = gv[i] == j + 1; p = V[i, A[j]]; am = M[i, A[j]]
    print(f"slot {j}: visible GT px {g.sum(1).sum(1).mean():.1f}, pred visible px {p.sum((1,2)).mean():.1f}, hits {(p & g).sum((1,2)).mean():.1f}; amodal pred px {am.sum((1,2)).mean():.1f}")
    # who takes the GT-visible pixels the assigned capsule misses
    miss = g & ~p
    takers = [(k, int((V[i, k] & miss).sum())) for k in range(8)]
    print("   missed visible pixels taken by capsule:", takers, "none:", int((miss & ~V[i].any(1)).sum()))
k = 1
a = M[:, k]; vk = V[:, k]
print(f"capsule {k}: amodal px {a.sum((1,2)).mean():.1f}, visible px {vk.sum((1,2)).mean():.1f}, of which on background {(vk & (gv == 0)).sum((1,2)).mean():.1f}, on circle {(vk & (gv == 1)).sum((1,2)).mean():.1f}, on square {(vk & (gv == 2)).sum((1,2)).mean():.1f}, on triangle {(vk & (gv == 3)).sum((1,2)).mean():.1f}")
