"""Print each checkpoint's shape cosines and its near copies (the measure of the removed
`w_distinct` term; the term itself is in flowcaps at commit 749cabb).

    python experiments/2026-11-28-distinct-shapes/likeness.py CHECKPOINT [CHECKPOINT ...]
"""
import sys

import torch
import torch.nn.functional as F

from flowcaps import geometry
from flowcaps.checkpoint import load

MARGIN = 0.96  # the removed TrainConfig.distinct_margin's default


def shape_likeness(model, n: int = 32, extent: float = 2.5, fill: float = 0.2) -> torch.Tensor:
    """(K, K) cosines of the capsules' canonical masks D(v; s_k), each moved to its centroid and
    zoomed to cover `fill` of an n x n grid over [-extent, extent]^2 first, so that a copy at
    another scale or offset counts as a copy. Needs model.shape_code "capsule"."""
    shape = model.shape_embed  # (K, S)
    k = shape.shape[0]
    grid = extent * geometry.pixel_centres(n, n, shape.device)  # (G, 2)
    zoom = torch.ones(k, device=shape.device)  # (K,)
    centre = torch.zeros(k, 2, device=shape.device)  # (K, 2)
    for _ in range(2):  # the second pass measures a small mask again at a finer zoom
        v = grid * zoom[:, None, None] + centre[:, None]  # (K, G, 2)
        p = torch.sigmoid(model.decoder(shape[None], v[None]).float())[0]  # (K, G)
        area = p.sum(1).clamp_min(1e-6)  # (K,) in grid cells at this zoom
        centre = centre + zoom[:, None] * (p[..., None] * grid).sum(1) / area[:, None]
        zoom = zoom * (area / (fill * n * n)).sqrt()
    v = grid * zoom[:, None, None] + centre[:, None]  # (K, G, 2)
    q = torch.sigmoid(model.decoder(shape[None], v[None]).float())[0]  # (K, G)
    q = q / q.norm(dim=1, keepdim=True).clamp_min(1e-6)
    return q @ q.T  # (K, K)


torch.set_num_threads(1)
for path in sys.argv[1:]:
    model = load(path)
    with torch.no_grad():
        cos = shape_likeness(model)  # (K, K)
    k = cos.shape[0]
    i, j = torch.triu_indices(k, k, 1)
    term = float((F.relu(cos[i, j] - MARGIN) / (1 - MARGIN)).sum())  # L_distinct
    print(f"{path}: L_distinct {term:.3f} at margin {MARGIN}")
    print("     " + " ".join(f"{j:6d}" for j in range(k)))
    for i in range(k):
        print(f"{i:3d}  " + " ".join(f"{float(cos[i, j]):6.3f}" for j in range(k)))
    copies = [(i, j, float(cos[i, j])) for i in range(k) for j in range(i + 1, k) if cos[i, j] > MARGIN]
    print("pairs above the margin: " + (", ".join(f"{i}-{j} ({c:.3f})" for i, j, c in copies) or "none"))
