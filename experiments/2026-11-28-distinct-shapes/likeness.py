"""Print each checkpoint's shape cosines (flowcaps.losses.shape_likeness) and its near copies.

    python experiments/2026-11-28-distinct-shapes/likeness.py CHECKPOINT [CHECKPOINT ...]
"""
import sys

import torch

from flowcaps.checkpoint import load
from flowcaps.losses import distinct_loss, shape_likeness

MARGIN = 0.96  # TrainConfig.distinct_margin's default

torch.set_num_threads(1)
for path in sys.argv[1:]:
    model = load(path)
    with torch.no_grad():
        cos = shape_likeness(model)  # (K, K)
        term = float(distinct_loss(model, MARGIN))
    k = cos.shape[0]
    print(f"{path}: L_distinct {term:.3f} at margin {MARGIN}")
    print("     " + " ".join(f"{j:6d}" for j in range(k)))
    for i in range(k):
        print(f"{i:3d}  " + " ".join(f"{float(cos[i, j]):6.3f}" for j in range(k)))
    copies = [(i, j, float(cos[i, j])) for i in range(k) for j in range(i + 1, k) if cos[i, j] > MARGIN]
    print("pairs above the margin: " + (", ".join(f"{i}-{j} ({c:.3f})" for i, j, c in copies) or "none"))
