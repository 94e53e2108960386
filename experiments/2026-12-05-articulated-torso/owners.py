"""Which capsule draws each articulated part, its scale, and where every capsule lies.

usage: python owners.py CHECKPOINT DATA [PAIRS]   (from the repository root; default 300 pairs)

For the first PAIRS test pairs (frame 0): each part's capsule by a Hungarian matching on the
amodal IoU pooled over the pairs (masks at 0.5; the benchmark's fixed assignment averages
per-image IoUs instead, so its numbers differ by a few thousandths), that
capsule's scale in pixels and mask area; then, for every capsule, the share of its mask on
each part and on the background (top three); last, the torso capsule's mask in its canonical
frame (v in [-2.5, 2.5]^2, '#' where the decoder's logit is positive).
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch

from benchmark.metrics import hungarian
from flowcaps import checkpoint
from geogen.dataset import read_split

ck, data = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
torch.set_num_threads(2)
model = checkpoint.load(ck).eval()
names = json.loads((Path(data) / "manifest.json").read_text())["slots"] + ["background"]
d = read_split(data, "test", ["frames", "amodal", "pose"], limit=n)
caps = model.parse(d["frames"][:, 0])
half = model.config.image_size / 2  # pose scale is in the [-1, 1] frame
M = (caps.masks.numpy() > 0.5).astype(np.float32)  # (B, K, H, W)
G = (d["amodal"][:, 0] > 0).astype(np.float32)  # (B, P, H, W)
inter = np.einsum("bkhw,bphw->kp", M, G)  # (K, P)
union = M.sum((0, 2, 3))[:, None] + G.sum((0, 2, 3))[None] - inter
iou = inter / np.maximum(union, 1)
owner = hungarian(iou)  # (P,) the capsule of each part
print(f"K = {M.shape[1]}, {n} test pairs")
for p, k in enumerate(owner):
    scale = caps.pose[:, k, 3].numpy() * half
    print(f"{names[p]:16s} capsule {k:2d}  IoU {iou[k, p]:.3f}  scale {scale.mean():.1f} +- "
          f"{scale.std():.1f} px  mask {M[:, k].sum((1, 2)).mean():.0f} px  "
          f"part {G[:, p].sum((1, 2)).mean():.0f} px")
spare = sorted(set(range(M.shape[1])) - set(owner.tolist()))
print("unassigned", spare, "mask px", [int(M[:, k].sum((1, 2)).mean()) for k in spare])
print("where each capsule lies (share of its mask on each part; they overlap at joints):")
Gb = np.concatenate([G, 1 - G.max(1, keepdims=True)], 1)  # (B, P + 1, H, W)
share = np.einsum("bkhw,bphw->kp", M, Gb) / np.maximum(M.sum((0, 2, 3))[:, None], 1)
for k in range(M.shape[1]):
    top = np.argsort(-share[k])[:3]
    print(f"{k:2d}", " ".join(f"{names[p]}:{share[k, p]:.2f}" for p in top))
torso = owner[names.index("torso")]
axis = torch.linspace(-2.5, 2.5, 41)
v = torch.stack(torch.meshgrid(axis, axis, indexing="ij"), -1).reshape(1, 1, -1, 2).flip(-1)
with torch.no_grad():
    logit = model.decoder(caps.shape[:1, torso:torso + 1], v)[0, 0].reshape(41, 41)
print(f"capsule {torso}'s mask in its canonical frame (every other row):")
for row in (logit > 0).numpy()[::2]:
    print("".join("#" if x else "." for x in row))
