"""Where a live dimension left out of the active set moves the circle: on the visible circle's
pixels, split by whether the circle's own mask (its motion over its peak) reaches 1/2, the mean
local-motion magnitude of the circle's dimension, of the copy and of the ground-truth flow (all
in PSD's unit, percent of the image side).

    python experiments/2026-12-07-psd-stage2-flow/copy_motion.py MODEL COPY_DIM DATA [PAIRS]

On the first PAIRS (256) training pairs, posterior means; the circle's dimension as the model's
own probe matched it (its meta's `probe.assignment`).
"""
import sys

import numpy as np
import torch

from baselines.psd import checkpoint
from baselines.psd.data import load_train, load_visible, part_names


@torch.no_grad()
def main(path: str, copy: int, data: str, pairs: int) -> None:
    torch.set_num_threads(1)
    model = checkpoint.load(path)
    circle = checkpoint.meta_of(checkpoint.read(path))["probe"]["assignment"]["circle"]
    labels = ("background",) + part_names(data)
    frames, flow = load_train(data, pairs)
    visible = load_visible(data, pairs)  # (N, H, W)
    frame0 = torch.from_numpy(frames[:, 0]).permute(0, 3, 1, 2).float() / 255  # (N, 3, H, W)
    flow_px = torch.from_numpy(flow.astype(np.float32)).permute(0, 3, 1, 2)  # (N, 2, H, W)
    mean, _ = model.encode(flow_px)  # (N, D)
    local = model.local_motions(frame0, mean)  # (N, 2, D, H, W)
    mag = local.norm(dim=1).numpy()  # (N, D, H, W)
    own = model.masks(local)[:, circle].numpy()  # (N, H, W) the circle's mask, PSD's rule
    corr = {d: round(float(np.corrcoef(mean[:, copy], mean[:, d])[0, 1]), 3)
            for d in model.active_dims()}
    print(f"copy {copy}: posterior-mean correlation with the active dimensions {corr}")
    on = visible == labels.index("circle")
    truth = np.linalg.norm(flow, axis=-1) * model.config.flow_scale  # (N, H, W) as the motions
    for name, sel in (("mask >= 1/2", on & (own >= 0.5)), ("mask < 1/2", on & (own < 0.5))):
        print(f"circle pixels, {name} ({int(sel.sum())}): circle's dimension "
              f"{mag[:, circle][sel].mean():.2f}, copy {mag[:, copy][sel].mean():.2f}, "
              f"ground truth {truth[sel].mean():.2f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 256)
