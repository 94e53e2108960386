"""Each active dimension's local motion on each part, by the sign of the circle's motion m.

For the first N test pairs: the mean of each active dimension's local motion (dx, dy, in the
model's flow units, percent of the side) over each part's visible pixels, averaged over the
pairs with m < -2 px and with m > 2 px. A dimension that moves its part both ways has both;
one that moves it one way only has one near zero.

    python experiments/2026-12-05-psd-latent-factors/signs.py MODEL DATA [N]
"""
import sys

import numpy as np
import torch

from baselines.psd.checkpoint import load
from geogen.dataset import read_split
from geogen.scene import own_motions
from geogen.schema import SLOTS

torch.set_num_threads(1)


def main(model_path: str, data: str, n: int = 600) -> None:
    model = load(model_path)
    test = read_split(data, "test", ("frames", "flow", "visible", "pose", "present"), limit=n)
    active = model.active_dims()
    on_part = []  # per batch (b, S, 2, A): mean local motion over each part's visible pixels
    with torch.no_grad():
        for i in range(0, len(test["pose"]), 50):
            flow = torch.from_numpy(np.asarray(test["flow"][i:i + 50, 0], np.float32))
            img = torch.from_numpy(np.asarray(test["frames"][i:i + 50, 0])).float() / 255
            mean, _ = model.encode(flow.permute(0, 3, 1, 2))  # (b, D)
            local = model.local_motions(img.permute(0, 3, 1, 2), mean)[:, :, active]  # (b, 2, A, H, W)
            vis = torch.from_numpy(np.asarray(test["visible"][i:i + 50, 0]))  # (b, H, W)
            parts = torch.stack([(vis == s + 1).float() for s in range(len(SLOTS))], 1)  # (b, S, H, W)
            total = torch.einsum("bcahw,bshw->bsca", local, parts)  # (b, S, 2, A)
            on_part.append((total / parts.sum((-1, -2)).clamp_min(1)[:, :, None, None]).numpy())
    per = np.concatenate(on_part)  # (N, S, 2, A)
    m = own_motions(test["pose"])[:, 0]  # (N,)
    print(f"{model_path}: active dimensions {active}; mean local motion (dx, dy) on each part")
    for s, part in enumerate(SLOTS):
        present = test["present"][:, s]
        print(f"{part}:")
        for a, d in enumerate(active):
            neg = per[present & (m < -2), s, :, a].mean(0)
            pos = per[present & (m > 2), s, :, a].mean(0)
            print(f"  dimension {d:2d}: m < -2: ({neg[0]:6.2f}, {neg[1]:6.2f})   "
                  f"m > 2: ({pos[0]:6.2f}, {pos[1]:6.2f})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 600)
