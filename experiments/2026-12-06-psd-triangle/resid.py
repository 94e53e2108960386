"""Where a trained PSD model's flow error lies: the sum of all its dimensions' local motions
(the stage-1 reconstruction, no structure) against the ground-truth flow on test pairs, by
region (background and each part's visible pixels; pixels at a label edge against the rest),
and how much of the triangle's own motion h its reconstruction leaves out (the interior x
residual regressed on h: slope -1 means h is missing entirely, 0 that it is all there).

    python experiments/2026-12-06-psd-triangle/resid.py MODEL DATA [N]

Units: percent of the image side, squared, averaged over pixels and both components (the
training loss's).
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

from baselines.psd.checkpoint import load
from geogen.dataset import open_split
from geogen.scene import own_motions
from geogen.schema import SLOTS

torch.set_num_threads(1)


def main(model_path: str, data: str, n: int) -> None:
    model = load(model_path)
    model.eval()
    test = open_split(data, "test").read(("frames", "flow", "visible", "pose"), n,
                                         t={"frames": 0, "flow": 0, "visible": 0})
    side = test["flow"].shape[1]
    own = torch.from_numpy(own_motions(test["pose"])).float() * 100 / side  # (N, S) percent
    regions = ["background", *SLOTS, "edge", "interior"]
    err_sum = dict.fromkeys(regions, 0.0)
    resid, h = [], []
    with torch.no_grad():
        for i in range(0, n, 50):
            flow = torch.from_numpy(np.asarray(test["flow"][i:i + 50], np.float32))
            flow = flow.permute(0, 3, 1, 2)  # (b, 2, H, W) pixels
            img = torch.from_numpy(np.asarray(test["frames"][i:i + 50])).float()
            img = img.permute(0, 3, 1, 2) / 255  # (b, 3, H, W)
            target = flow * 100 / side  # (b, 2, H, W) percent
            mean, _ = model.encode(flow)  # (b, D)
            rec = model.local_motions(img, mean).sum(2)  # (b, 2, H, W) percent
            err = ((rec - target) ** 2).sum(1)  # (b, H, W)
            vis = torch.from_numpy(np.asarray(test["visible"][i:i + 50])).long()  # (b, H, W)
            onehot = F.one_hot(vis, len(SLOTS) + 1).permute(0, 3, 1, 2).float()  # (b, S+1, H, W)
            edge = F.max_pool2d(onehot, 3, 1, 1).sum(1) > 1  # (b, H, W) another label within 1 px
            for s, name in enumerate(regions[:len(SLOTS) + 1]):
                err_sum[name] += (err * (vis == s)).sum().item()
            err_sum["edge"] += (err * edge).sum().item()
            err_sum["interior"] += (err * ~edge).sum().item()
            tri = ((vis == len(SLOTS)) & ~edge).float()  # (b, H, W) the triangle's interior
            count = tri.sum((1, 2))
            rx = ((rec[:, 0] - target[:, 0]) * tri).sum((1, 2)) / count.clamp_min(1)
            keep = count > 5
            resid.append(rx[keep])
            h.append(own[i:i + 50, len(SLOTS) - 1][keep])
    total = n * side * side * 2
    r, hh = torch.cat(resid).numpy(), torch.cat(h).numpy()
    print(f"{model_path}: active {model.active_dims()}")
    print(f"flow MSE {(err_sum['edge'] + err_sum['interior']) / total:.3f}; by region: "
          + ", ".join(f"{k} {v / total:.3f}" for k, v in err_sum.items()))
    print(f"triangle interior x residual on h: slope {(r * hh).sum() / (hh * hh).sum():.3f}, "
          f"correlation {np.corrcoef(r, hh)[0, 1]:.3f} ({len(r)} pairs)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1000)
