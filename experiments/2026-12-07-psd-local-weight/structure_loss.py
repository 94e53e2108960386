"""The flow loss of a trained PSD with one structure weight set by hand, all else fixed.

    python experiments/2026-12-07-psd-local-weight/structure_loss.py MODEL DATA [PAIRS]

For each ordered pair of active dimensions (parent, child), the mean flow loss over the first
PAIRS (512) training pairs at posterior means, eval mode, with sigmoid(logit[parent, child]) set
to 0, 0.5, 0.8, 0.9 and 0.99 and every other weight as trained. Where the loss is lowest near
the trained weight, the weight sits at the optimum for the local motions stage 2 has learned.
"""
import sys

import numpy as np
import torch

from baselines.psd import checkpoint
from baselines.psd.data import load_train
from baselines.psd.losses import flow_loss

WEIGHTS = (0.0, 0.5, 0.8, 0.9, 0.99)
BATCH = 64


@torch.no_grad()
def mean_loss(model, frame0: torch.Tensor, flow_px: torch.Tensor) -> float:
    total = 0.0
    for i in range(0, len(frame0), BATCH):
        out = model(frame0[i:i + BATCH], flow_px[i:i + BATCH])
        total += float(flow_loss(out.flow, flow_px[i:i + BATCH] * model.config.flow_scale)) \
            * len(frame0[i:i + BATCH])
    return total / len(frame0)


def main(path: str, data: str, pairs: int) -> None:
    torch.set_num_threads(1)
    model = checkpoint.load(path)
    frames, flow = load_train(data, pairs)
    frame0 = torch.from_numpy(frames[:, 0]).permute(0, 3, 1, 2).float() / 255  # (N, 3, H, W)
    flow_px = torch.from_numpy(flow.astype(np.float32)).permute(0, 3, 1, 2)  # (N, 2, H, W)
    active = model.active_dims()
    logits = model.structure.logits
    trained = logits.detach().clone()
    print("active", active)
    print("structure (parent rows)", np.round(torch.sigmoid(trained)[active][:, active].numpy(), 3))
    print("as trained", round(mean_loss(model, frame0, flow_px), 4))
    for parent in active:
        for child in active:
            if parent == child:
                continue
            row = []
            for w in WEIGHTS:
                logits.data.copy_(trained)
                logits.data[parent, child] = float(np.log(w / (1 - w))) if w > 0 else -20.0
                row.append(round(mean_loss(model, frame0, flow_px), 4))
            print(f"{parent}->{child}", dict(zip(WEIGHTS, row)))
    logits.data.copy_(trained)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 512)
