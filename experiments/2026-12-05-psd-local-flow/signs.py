"""Each active dimension's local motion on each part, by the sign of that part's own motion
(circle m, square v, triangle h), for a model of `run.py`: the encoder sees the local flow
(`--global`: the unchanged flow). A dimension that moves its part both ways has both columns;
one that moves it one way only has one near zero.

    python experiments/2026-12-05-psd-local-flow/signs.py MODEL DATA [N] [--global]
"""
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from run import local_flow  # noqa: E402

from baselines.psd.checkpoint import load  # noqa: E402
from geogen.dataset import open_split  # noqa: E402
from geogen.scene import own_motions  # noqa: E402
from geogen.schema import SLOTS  # noqa: E402

torch.set_num_threads(1)


def main(model_path: str, data: str, n: int, use_global: bool) -> None:
    model = load(model_path)
    test = open_split(data, "test").read(("frames", "flow", "visible", "pose", "present"), n,
                                         t={"frames": 0, "flow": 0, "visible": 0})
    flow_all = test["flow"] if use_global else local_flow(test["flow"], test["pose"], test["visible"])
    active = model.active_dims()
    on_part = []  # per batch (b, S, 2, A): mean local motion over each part's visible pixels
    with torch.no_grad():
        for i in range(0, n, 50):
            flow = torch.from_numpy(np.asarray(flow_all[i:i + 50], np.float32))
            img = torch.from_numpy(np.asarray(test["frames"][i:i + 50])).float() / 255
            mean, _ = model.encode(flow.permute(0, 3, 1, 2))  # (b, D)
            local = model.local_motions(img.permute(0, 3, 1, 2), mean)[:, :, active]  # (b, 2, A, H, W)
            vis = torch.from_numpy(np.asarray(test["visible"][i:i + 50]))  # (b, H, W)
            parts = torch.stack([(vis == s + 1).float() for s in range(len(SLOTS))], 1)  # (b, S, H, W)
            total = torch.einsum("bcahw,bshw->bsca", local, parts)  # (b, S, 2, A)
            on_part.append((total / parts.sum((-1, -2)).clamp_min(1)[:, :, None, None]).numpy())
    per = np.concatenate(on_part)  # (N, S, 2, A)
    own = own_motions(test["pose"])  # (N, S)
    print(f"{model_path}: active dimensions {active}; mean local motion (dx, dy) on each part, "
          f"by the sign of the part's own motion")
    for s, part in enumerate(SLOTS):
        present = test["present"][:, s]
        print(f"{part} ({'mvh'[s]}):")
        for a, d in enumerate(active):
            neg = per[present & (own[:, s] < -2), s, :, a].mean(0)
            pos = per[present & (own[:, s] > 2), s, :, a].mean(0)
            print(f"  dimension {d:2d}: < -2: ({neg[0]:6.2f}, {neg[1]:6.2f})   "
                  f"> 2: ({pos[0]:6.2f}, {pos[1]:6.2f})")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0], args[1], int(args[2]) if len(args) > 2 else 600, "--global" in sys.argv)
