"""What a trained PSD learned, against the ground-truth parts: per latent dimension its KL, which
part an active dimension moves and how well its mask covers it, and the structure matrix.

A dimension's mask is PSD's (its local motion magnitude over its own maximum in the image),
thresholded at `threshold`; its IoU with a part is the mean, over the pairs where the part is
visible, of the IoU with the part's visible mask (as Table 1's visible IoU averages). Parts are assigned to active dimensions one-to-one by IoU (scipy's
linear_sum_assignment), which names the structure's entries by parts ("circle->square").
Where each part moves by one drawn number (Geo's), `factor_codes` says which of those numbers
each active dimension's posterior mean encodes: PSD's own model has one dimension per part.

Letters: N pairs, D latent dimensions, A active dimensions, S part slots (the data's; Geo's by default),
H = W image side.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from baselines.psd.losses import kl_per_dim
from baselines.psd.model import PSD
from geogen.schema import SLOTS

BATCH = 32
FACTOR_BINS = 10  # quantile bins of a part's motion in `binned_r2`


@torch.no_grad()
def probe(model: PSD, frame0: np.ndarray, flow: np.ndarray, visible: np.ndarray, *,
          threshold: float = 0.5, parts: tuple[str, ...] = SLOTS,
          motions: np.ndarray | None = None, present: np.ndarray | None = None) -> dict[str, Any]:
    """frame0 (N, H, W, 3) uint8, flow (N, H, W, 2) pixels frame 0 -> 1, visible (N, H, W)
    (0 background, s + 1 part s) -> the probe's record (plain JSON data). With each part's own
    motion number `motions` (N, S) and `present` (N, S) (Geo's: geogen.scene.own_motions), it
    also says which of them each active dimension encodes (`factor_codes`)."""
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    active = model.active_dims()
    kl = torch.zeros(model.config.latent_dim, dtype=torch.float64)
    iou_sum = np.zeros((len(active), len(parts)))  # (A, S)
    seen = np.zeros(len(parts))  # (S,)
    means = []
    for i in range(0, len(flow), BATCH):
        f = torch.from_numpy(np.asarray(flow[i:i + BATCH], np.float32)).to(dev)
        f = f.permute(0, 3, 1, 2)  # (b, 2, H, W)
        mean, log_var = model.encode(f)  # (b, D)
        kl += kl_per_dim(mean, log_var).sum(0).double().cpu()
        means.append(mean.double().cpu().numpy())
        if not active:
            continue
        img = torch.from_numpy(np.asarray(frame0[i:i + BATCH])).to(dev)
        img = img.permute(0, 3, 1, 2).float() / 255  # (b, 3, H, W)
        local = model.local_motions(img, mean)  # (b, 2, D, H, W)
        masks = (model.masks(local[:, :, model.active]) > threshold).cpu().numpy()  # (b, A, H, W)
        total, count = image_ious(masks, np.asarray(visible[i:i + BATCH]), len(parts))
        iou_sum, seen = iou_sum + total, seen + count
    model.train(was_training)
    weights = model.structure.weights(model.active).detach().cpu().numpy()  # (D, D)
    structure = weights[np.ix_(active, active)] if active else np.zeros((0, 0))  # (A, A)
    iou = np.divide(iou_sum, seen, out=np.zeros_like(iou_sum), where=seen > 0)  # (A, S)
    found = summarise(kl.numpy() / max(len(flow), 1), active, iou, structure, parts,
                      pairs=len(flow), threshold=threshold)
    if motions is not None and means:
        found["factor_codes"] = factor_codes(np.concatenate(means)[:, active], active,
                                             np.asarray(motions, np.float64),
                                             np.asarray(present, bool), parts)
    return found


def binned_r2(x: np.ndarray, y: np.ndarray, bins: int = FACTOR_BINS) -> float:
    """The share of var(y) that E[y | x's quantile bin] explains: how much of y a factor x
    accounts for, whether y codes it linearly or not. 0 for fewer than 2 samples a bin."""
    if len(x) < 2 * bins or y.var() <= 0:
        return 0.0
    idx = np.digitize(x, np.quantile(x, np.linspace(0, 1, bins + 1)[1:-1]))  # (n,) bin of each
    counts = np.bincount(idx, minlength=bins)  # (bins,)
    fit = (np.bincount(idx, y, minlength=bins) / np.maximum(counts, 1))[idx]  # (n,)
    return float(max(0.0, 1 - ((y - fit) ** 2).mean() / y.var()))


def linear_r2(X: np.ndarray, y: np.ndarray) -> float:
    """R^2 of the least-squares fit of y (n,) from X (n, A) and a constant."""
    if len(y) < 2 or y.var() <= 0:
        return 0.0
    A = np.c_[X, np.ones(len(X))]  # (n, A + 1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return float(max(0.0, 1 - ((y - A @ coef) ** 2).mean() / y.var()))


def factor_codes(mean: np.ndarray, active: list[int], motions: np.ndarray, present: np.ndarray,
                 parts: tuple[str, ...]) -> dict[str, Any]:
    """mean (N, A) the active dimensions' posterior means; motions, present (N, S). PSD's own
    model gives each part's motion one dimension; here, per active dimension, the share of its
    variance each part's motion explains (over the pairs with that part present) and the part
    it encodes best; per part, how much of its motion all active dimensions hold (linear R^2)."""
    dims = []
    for a, d in enumerate(active):
        r2 = {p: round(binned_r2(motions[present[:, s], s], mean[present[:, s], a]), 3)
              for s, p in enumerate(parts)}
        dims.append({"dim": d, "r2": r2, "part": max(r2, key=r2.get)})
    held = {p: round(linear_r2(mean[present[:, s]], motions[present[:, s], s]), 3)
            for s, p in enumerate(parts)}
    return {"dims": dims, "held": held}


def image_ious(masks: np.ndarray, visible: np.ndarray,
               n_parts: int) -> tuple[np.ndarray, np.ndarray]:
    """masks (N, A, H, W) bool, visible (N, H, W) -> the sum over images of each dimension's
    IoU with each part (A, S), over the images where the part is visible, and their count (S,)."""
    truth = visible[:, None] == np.arange(1, n_parts + 1)[:, None, None]  # (N, S, H, W)
    m = masks.reshape(len(masks), masks.shape[1], -1).astype(np.float64)  # (N, A, P)
    t = truth.reshape(len(truth), n_parts, -1).astype(np.float64)  # (N, S, P)
    inter = np.einsum("nap,nsp->nas", m, t)  # (N, A, S)
    union = m.sum(2)[:, :, None] + t.sum(2)[:, None, :] - inter  # (N, A, S)
    present = t.sum(2) > 0  # (N, S)
    iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    return (iou * present[:, None]).sum(0), present.sum(0).astype(np.float64)


def summarise(kl: np.ndarray, active: list[int], iou: np.ndarray, structure: np.ndarray,
              parts: tuple[str, ...], *, pairs: int, threshold: float) -> dict[str, Any]:
    """The probe's record: kl (D,), iou (A, S) of each active dimension with each part,
    structure (A, A) with parent rows and child columns."""
    dims = [{"dim": d, "kl": round(float(kl[d]), 4), "part": parts[int(iou[a].argmax())],
             "iou": round(float(iou[a].max()), 4),
             "iou_by_part": {p: round(float(iou[a, s]), 4) for s, p in enumerate(parts)}}
            for a, d in enumerate(active)]
    rows, cols = linear_sum_assignment(-iou) if len(active) else ((), ())
    owner = {parts[s]: int(a) for a, s in zip(rows, cols)}  # part -> index into active
    by_part = {f"{p}->{c}": round(float(structure[owner[p], owner[c]]), 4)
               for p in owner for c in owner if p != c}
    return {"pairs": pairs, "threshold": threshold,
            "kl": [round(float(v), 4) for v in kl], "active_dims": list(active), "dims": dims,
            "assignment": {p: active[a] for p, a in owner.items()},
            "assigned_iou": {p: round(float(iou[a, parts.index(p)]), 4) for p, a in owner.items()},
            "structure": [[round(float(w), 4) for w in row] for row in structure],
            "structure_by_part": by_part}
