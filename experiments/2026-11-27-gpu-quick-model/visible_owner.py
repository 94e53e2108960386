"""Which capsules show each class's visible pixels: for every ground-truth visible pixel of a
class, the capsule with the largest visibility there (frame 0 of the first N test pairs).

    python results/gpu-2026-11-27/visible_owner.py CHECKPOINT RECORD DATA [N]

RECORD gives the capsule each class was assigned to (the fixed assignment).
"""
import json
import sys

import numpy as np
import torch

import flowcaps
from geogen.dataset import read_split

SLOTS = ("circle", "square", "triangle")


def main(checkpoint: str, record: str, data: str, n: int = 200) -> None:
    torch.set_num_threads(1)
    assign = json.load(open(record))["metrics"]["assignment"]
    model = flowcaps.load(checkpoint, device="cpu").eval()
    t = read_split(data, "test", ("frames", "visible"), limit=n)
    images = torch.from_numpy(t["frames"][:, 0].transpose(0, 3, 1, 2).astype(np.float32) / 255)
    with torch.no_grad():
        vis = model.parse(images).visible.numpy()  # (B, K, H, W)
    owner = vis.argmax(1)  # (B, H, W)
    print(f"{checkpoint}, first {n} test pairs of {data}")
    for s, name in enumerate(SLOTS):
        inside = t["visible"][:, 0] == s + 1  # (B, H, W)
        share = np.bincount(owner[inside], minlength=vis.shape[1]) / inside.sum()
        print(f"{name}: assigned capsule {assign[name]}; share of its visible pixels by capsule "
              + " ".join(f"{v:.3f}" for v in share))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], *(int(a) for a in sys.argv[4:5]))
