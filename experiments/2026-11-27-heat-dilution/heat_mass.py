"""Where the translation heat maps put their attention: on the shape, or on the background.

    python heat_mass.py CHECKPOINT DATA [N]

On the first N (300) test pairs, frame 0, per class: for the capsule the fixed assignment gives
it and for the capsule whose heat-map centre is nearest the shape's centre, the share of the
heat map's softmax mass on cells the shape's amodal mask touches, and on those cells grown by
one cell. A softargmax whose mass sits partly on the static background moves by only that share
of the shape's motion, so on Geo+ this share should match the shift gain of shift_gain.py
(experiments/2026-11-27-gpu-encoder-width).
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

from benchmark.metrics import SegmentationScore
from flowcaps import checkpoint, geometry
from geogen.dataset import read_split
from geogen.schema import SLOTS

torch.set_num_threads(1)
path, root = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
model = checkpoint.load(path).eval()
enc = model.encoder
data = read_split(root, "test", ["frames", "amodal", "visible", "present", "pose"], limit=n)
img0 = torch.from_numpy(data["frames"][:, 0]).float().div(255).permute(0, 3, 1, 2)  # (N, 3, H, W)
h = img0.shape[-1]
with torch.no_grad():
    caps = model.parse(img0)
    x = img0
    for i, conv in enumerate(enc.convs):  # the encoder's blocks up to its heat maps
        x = F.relu(conv(x))  # (N, c, h, w)
        if i == enc.heat_block:
            logits = enc.heat(x).flatten(2) + enc.prior_gain * enc.heat_prior  # (N, K, h*w)
            attn = torch.softmax(logits, -1)  # (N, K, h*w)
            if hasattr(enc, "window_mix"):  # model.heat_window (commit 7a28116): what it uses
                attn = enc._windowed(logits, attn)
            attn = attn.numpy()
            side = x.shape[-1]
            break
        x = F.avg_pool2d(x, 2)
amodal, present = data["amodal"][:, 0], data["present"]  # (N, S, H, W), (N, S)
score = SegmentationScore(model.config.num_capsules)
score.update(caps.masks.numpy(), caps.visible.numpy(), amodal, data["visible"][:, 0], present)
assign = score.assignment()
m = torch.from_numpy(amodal.astype(np.float32))  # (N, S, H, W)
touch = F.adaptive_max_pool2d(m, side)  # (N, S, side, side) cells the shape touches
grown = F.max_pool2d(touch, 3, stride=1, padding=1)  # one cell further
touch, grown = touch.flatten(2).numpy(), grown.flatten(2).numpy()  # (N, S, side*side)
centre = geometry.frame_to_pixels(caps.pose[..., :2] + 1, h, h).numpy()  # (N, K, 2) pixels
for s, name in enumerate(SLOTS):
    rows = np.where(present[:, s])[0]
    dist = np.linalg.norm(centre[rows] - data["pose"][rows, 0, s, None, :2], axis=2)  # (R, K)
    for label, ks in (("assigned", np.full(len(rows), assign[s])), ("nearest", dist.argmin(1))):
        a = attn[rows, ks]  # (R, side*side)
        on = (a * touch[rows, s]).sum(1).mean()
        near = (a * grown[rows, s]).sum(1).mean()
        print(f"{name} {label}: heat mass on the shape {on:.2f}, within one cell {near:.2f}")
