"""Where each part's mask lies: of a part's visible pixels, the share its dimension's mask
(PSD's, above 1/2 of its peak) covers, and its mask pixels on each other label as a share of
the same count.

    python experiments/2026-12-07-psd-local-weight/mask_cover.py MODEL DATA [PAIRS]

On the first PAIRS (256) training pairs, posterior means; parts matched to dimensions by the
model's own probe (its meta's `probe.assignment`).
"""
import sys

import numpy as np
import torch

from baselines.psd import checkpoint
from baselines.psd.data import load_train, load_visible, part_names

BATCH = 64


@torch.no_grad()
def main(path: str, data: str, pairs: int) -> None:
    torch.set_num_threads(1)
    model = checkpoint.load(path)
    owner = checkpoint.meta_of(checkpoint.read(path))["probe"]["assignment"]  # part -> dim
    labels = ("background",) + part_names(data)  # visible: 0 background, s + 1 part s
    frames, flow = load_train(data, pairs)
    visible = load_visible(data, pairs)  # (N, H, W)
    frame0 = torch.from_numpy(frames[:, 0]).permute(0, 3, 1, 2).float() / 255  # (N, 3, H, W)
    flow_px = torch.from_numpy(flow.astype(np.float32)).permute(0, 3, 1, 2)  # (N, 2, H, W)
    active = model.active_dims()
    on = {(p, q): 0 for p in owner for q in labels}
    own = {p: 0 for p in owner}
    for i in range(0, len(frame0), BATCH):
        mean, _ = model.encode(flow_px[i:i + BATCH])  # (b, D)
        local = model.local_motions(frame0[i:i + BATCH], mean)  # (b, 2, D, H, W)
        masks = (model.masks(local[:, :, model.active]) > 0.5).numpy()  # (b, A, H, W)
        vis = visible[i:i + BATCH]
        for part, dim in owner.items():
            mask = masks[:, active.index(dim)]
            own[part] += int((vis == labels.index(part)).sum())
            for label, name in enumerate(labels):
                on[(part, name)] += int((mask & (vis == label)).sum())
    for part in owner:
        shares = ", ".join(f"{q} {on[(part, q)] / own[part]:.3f}" for q in labels)
        print(f"{part} (dim {owner[part]}): mask pixels per visible {part} pixel on {shares}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 256)
