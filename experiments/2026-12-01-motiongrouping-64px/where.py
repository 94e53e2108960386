"""Do a trained model's alphas follow the motion or the position? On the first 64 test pairs of
DATA: each slot's alpha map, its variance over images (what the input changes) against the
variance over pixels of its mean over images (a fixed spatial layout), and each slot's mean
alpha on moving and on static pixels.

    where.py DATA CKPT
"""
import sys
from pathlib import Path
import torch
from baselines.motiongrouping import checkpoint
from benchmark.datasets import read_checked

data, ckpt = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
model = checkpoint.load(ckpt).eval()
test = read_checked(Path(data), "test", ("flow",), 64)
flow = torch.as_tensor(test["flow"][:, 0]).float().permute(0, 3, 1, 2)  # (B, 2, H, W) px
with torch.no_grad():
    a = model(flow).alphas  # (B, K, H, W)
moving = flow.norm(dim=1) > 0.05  # (B, H, W)
mean_map = a.mean(0)  # (K, H, W)
print("per slot: variance over images", [round(v, 4) for v in a.var(0).mean((1, 2)).tolist()])
print("per slot: variance over pixels of the mean map", [round(v, 4) for v in mean_map.var((1, 2)).tolist()])
mv = moving[:, None].float()
print("per slot: mean alpha on moving pixels", [round(v, 3) for v in ((a * mv).sum((0, 2, 3)) / mv.sum()).tolist()])
print("per slot: mean alpha on static pixels", [round(v, 3) for v in ((a * (1 - mv)).sum((0, 2, 3)) / (1 - mv).sum()).tolist()])
q = mean_map.argmax(0)  # (H, W) which slot leads each pixel on average
print("mean-map leader per 8x8 block:")
for r in range(0, q.shape[0], 8):
    print(" ".join(str(int(q[r, c])) for c in range(0, q.shape[1], 8)))
