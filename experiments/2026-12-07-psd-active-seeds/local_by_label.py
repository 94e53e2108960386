"""How far each part's dimension moves each label: the mean magnitude of its local motion (PSD's
unit, percent of the image side) over the visible pixels of the background and of each part.

    python experiments/2026-12-07-psd-active-seeds/local_by_label.py MODEL DATA CIRCLE SQUARE TRIANGLE [PAIRS]

CIRCLE SQUARE TRIANGLE: the dimensions to read (a stage-1 copy has no active set, so they are
given, as the final model's probe matched them). On the first PAIRS (128) training pairs,
posterior means.
"""
import sys

import numpy as np
import torch

from baselines.psd import checkpoint
from baselines.psd.data import load_train, load_visible, part_names


@torch.no_grad()
def main(path: str, data: str, dims: dict[str, int], pairs: int) -> None:
    torch.set_num_threads(1)
    model = checkpoint.load(path)
    labels = ("background",) + part_names(data)
    frames, flow = load_train(data, pairs)
    visible = load_visible(data, pairs)  # (N, H, W)
    frame0 = torch.from_numpy(frames[:, 0]).permute(0, 3, 1, 2).float() / 255  # (N, 3, H, W)
    flow_px = torch.from_numpy(flow.astype(np.float32)).permute(0, 3, 1, 2)  # (N, 2, H, W)
    mean, _ = model.encode(flow_px)  # (N, D)
    mag = model.local_motions(frame0, mean).norm(dim=1).numpy()  # (N, D, H, W)
    for part, d in dims.items():
        by_label = {name: round(float(mag[:, d][visible == i].mean()), 2)
                    for i, name in enumerate(labels)}
        print(f"{part} (dim {d}): |local motion| on {by_label}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], dict(zip(("circle", "square", "triangle"), map(int, args[2:5]))),
         int(args[5]) if len(args) > 5 else 128)
