"""How the capsules' translations follow the shapes between the frames.

    python shift_gain.py CHECKPOINT DATA

On the first 300 test pairs, per class: for the capsule the fixed assignment gives it and for the
capsule whose centre is nearest the shape's centre in each image, the gain of the predicted shift
along the true one (sum p.t / sum t.t: 1 follows the motion, 0 stays put), the end-point error
of the shift, and the capsule's mean distance from the shape's centre in frame 0.
"""
import sys

import numpy as np
import torch

from benchmark.metrics import SegmentationScore
from flowcaps import checkpoint, geometry
from geogen.dataset import read_split
from geogen.schema import SLOTS

torch.set_num_threads(1)
path, root, n = sys.argv[1], sys.argv[2], 300
model = checkpoint.load(path).eval()
data = read_split(root, "test", ["frames", "amodal", "visible", "present", "pose"], limit=n)
frames = torch.from_numpy(data["frames"]).float().div(255).permute(0, 1, 4, 2, 3)  # (N, T, 3, H, W)
h = frames.shape[-1]
with torch.no_grad():
    caps = model.parse(frames[:, 0])
    _, pose1, _ = model.encode(frames[:, 1])
amodal, present = data["amodal"][:, 0], data["present"]  # (N, S, H, W), (N, S)
score = SegmentationScore(model.config.num_capsules)  # the benchmark's fixed assignment
score.update(caps.masks.numpy(), caps.visible.numpy(), amodal, data["visible"][:, 0], present)
assign = score.assignment()
shift = geometry.frame_to_pixels(pose1[..., :2] - caps.pose[..., :2], h, h).numpy()  # (N, K, 2)
centre = geometry.frame_to_pixels(caps.pose[..., :2] + 1, h, h).numpy()  # (N, K, 2) in pixels
for s, name in enumerate(SLOTS):
    rows = np.where(present[:, s])[0]
    true = data["pose"][rows, 1, s, :2] - data["pose"][rows, 0, s, :2]  # (R, 2)
    dist = np.linalg.norm(centre[rows] - data["pose"][rows, 0, s, None, :2], axis=2)  # (R, K)
    for label, ks in (("assigned", np.full(len(rows), assign[s])), ("nearest", dist.argmin(1))):
        pred = shift[rows, ks]  # (R, 2)
        gain = (pred * true).sum() / (true * true).sum()
        err = np.linalg.norm(pred - true, axis=1).mean()
        print(f"{name} {label}: shift gain {gain:.2f}, err {err:.2f}, "
              f"centre dist {dist[np.arange(len(rows)), ks].mean():.1f} px")
