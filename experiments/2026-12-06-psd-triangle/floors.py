"""What parts of Geo's flow weigh in PSD's flow loss (percent of the side, squared, averaged over
pixels and both components), on training pairs: the whole flow (the loss of predicting 0), the
error the quick profile's half-size motion decoder cannot avoid (2x2 averages upsampled
bilinearly), and for each part the loss of leaving its own motion (m, v, h) out on its visible
pixels.

    python experiments/2026-12-06-psd-triangle/floors.py DATA [N]
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

from geogen.dataset import open_split
from geogen.scene import own_motions
from geogen.schema import SLOTS


def main(data: str, n: int) -> None:
    train = open_split(data, "train").read(("flow", "visible", "pose"), n,
                                           t={"flow": 0, "visible": 0})
    side = train["flow"].shape[1]
    flow = torch.from_numpy(np.asarray(train["flow"], np.float32)).permute(0, 3, 1, 2) * 100 / side
    vis = torch.from_numpy(np.asarray(train["visible"])).long()  # (N, H, W)
    own = torch.from_numpy(own_motions(train["pose"])).float() * 100 / side  # (N, S)
    half = F.interpolate(F.avg_pool2d(flow, 2), scale_factor=2, mode="bilinear",
                         align_corners=False)  # (N, 2, H, W)
    print(f"{n} training pairs of {data}: whole flow {(flow ** 2).mean():.3f}; "
          f"half-size decoder floor {((half - flow) ** 2).mean():.3f}")
    for s, part in enumerate(SLOTS):
        on = (vis == s + 1).float()  # (N, H, W)
        comps = 2 if s == 0 else 1  # the circle's (m, m) moves both components
        cost = (own[:, s, None, None] ** 2 * on).mean() * comps / 2
        print(f"  {part}: {on.mean():.4f} of the pixels; its own motion ({'mvh'[s]}) left out "
              f"costs {cost:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3000)
