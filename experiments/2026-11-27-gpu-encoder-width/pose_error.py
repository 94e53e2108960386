"""Where a FlowCapsules checkpoint's flow goes wrong on the shapes: pose or masks.

    python pose_error.py CHECKPOINT DATA [N]

On the first N test pairs (default 300), for each shape class and the capsule the fixed
assignment gives it (mean amodal IoU over these pairs, Hungarian): the end-point error on the
shape's ground-truth pixels of that capsule's own motion T_k(u) - u, of the best capsule's, and
of the composed flow; how much of the shape the capsules cover; and the error of the capsule's
translation from frame 0 to frame 1 against the shape's true displacement.
"""
import sys

import numpy as np
import torch

from benchmark.metrics import SegmentationScore
from flowcaps import checkpoint, geometry
from geogen.dataset import read_split
from geogen.schema import SLOTS

torch.set_num_threads(1)
path, root = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
model = checkpoint.load(path).eval()
data = read_split(root, "test", ["frames", "flow", "amodal", "visible", "present", "pose"], limit=n)
frames = torch.from_numpy(data["frames"]).float().div(255).permute(0, 1, 4, 2, 3)  # (N, T, 3, H, W)
h = w = frames.shape[-1]
with torch.no_grad():
    caps = model.parse(frames[:, 0])
    _, pose1, _ = model.encode(frames[:, 1])
    u = geometry.pixel_centres(h, w).expand(n, -1, -1)  # (N, H*W, 2)
    pm = model.masks_at(caps.shape, caps.pose, caps.depth, u)
    own = geometry.frame_to_pixels(geometry.capsule_flow(pm.v, pose1, u), h, w)  # (N, K, H*W, 2)
    composed = (pm.visible[..., None] * own).sum(1)  # (N, H*W, 2)
amodal, present = data["amodal"][:, 0], data["present"]  # (N, S, H, W), (N, S)
score = SegmentationScore(model.config.num_capsules)  # the benchmark's fixed assignment
score.update(caps.masks.numpy(), caps.visible.numpy(), amodal, data["visible"][:, 0], present)
assign = score.assignment()
gt = data["flow"][:, 0].reshape(n, -1, 2)  # (N, H*W, 2)
print(f"{path}: {n} test pairs")
for s, name in enumerate(SLOTS):
    k, rows = assign[s], np.where(present[:, s])[0]
    e_own, e_best, e_comp, cover = [], [], [], []
    for b in rows:
        px = amodal[b, s].reshape(-1)
        err = np.linalg.norm(own[b, :, px].numpy() - gt[b, px][None], axis=2).mean(1)  # (K,)
        e_own.append(err[k])
        e_best.append(err.min())
        e_comp.append(np.linalg.norm(composed[b, px].numpy() - gt[b, px], axis=1).mean())
        cover.append(float(pm.visible[b, :, px].sum(0).mean()))
    shift = geometry.frame_to_pixels(pose1[rows, k, :2] - caps.pose[rows, k, :2], h, w).numpy()
    true = data["pose"][rows, 1, s, :2] - data["pose"][rows, 0, s, :2]
    print(f"  {name:8s} capsule {k}: IoU {score.mean_matrix()[k, s]:.3f}; EPE on the shape: own "
          f"motion {np.mean(e_own):.2f}, best capsule {np.mean(e_best):.2f}, composed "
          f"{np.mean(e_comp):.2f} px; covered {np.mean(cover):.2f}; translation error "
          f"{np.linalg.norm(shift - true, axis=1).mean():.2f} px (true shift "
          f"{np.linalg.norm(true, axis=1).mean():.2f})")
