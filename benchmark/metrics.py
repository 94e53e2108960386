"""Part metrics over numpy arrays: mask IoU with capsule-to-slot matching, flow EPE, ARI.

Letters: B images in a batch, K capsules (predicted parts), S = 3 ground-truth shape
slots (geogen.schema.SLOTS), H, W image side, P = H * W pixels.

Every metric is an accumulator over sufficient statistics, so 10k test images are
scored batch by batch with memory independent of N:

- `SegmentationScore` keeps, for amodal and visible masks, the (K, S) sums of
  per-image IoU over the images where slot s is present, the per-slot counts, and the
  per-slot sums under per-image Hungarian matching.
- `FlowScore` keeps end-point-error sums and pixel counts.
- `AriScore` keeps the sum of per-image foreground ARI and the image count.

Conventions (the same for every method):
- A mask pixel is "on" when its probability is > 0.5.
- IoU of two empty masks is 1 (they agree); the ground truth of a present slot is
  never empty in practice, so this only matters for degenerate inputs.
- A slot's IoU is averaged over the images where it is present (`present`, from the
  dataset; a fully occluded slot still counts for the visible IoU, where an empty
  prediction scores 1).
- "all" is the mean over present (image, slot) pairs, not the mean of the three
  per-class numbers: circle is present in every image, so it weighs more.
- Fixed assignment: one capsule per slot, chosen once by Hungarian matching
  (maximising) on the test-set mean amodal IoU matrix; capsule identities are meant to
  be stable across images. Per-image assignment: Hungarian on each image's amodal IoU
  matrix over its present slots. The visible IoU uses the same two matchings (chosen
  on amodal masks), so both numbers describe the same capsule-to-shape map.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

from geogen.schema import BACKGROUND, S, SLOTS

THRESHOLD = 0.5  # a probability above this puts the pixel inside the mask


def iou_matrix(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Per-image IoU between every predicted and every ground-truth mask.

    Args:
        pred: (B, K, H, W) bool.
        gt: (B, S, H, W) bool.
    Returns:
        (B, K, S) float64; 1 where both masks are empty.
    """
    B, K = pred.shape[:2]
    p = pred.reshape(B, K, -1).astype(np.float32)  # (B, K, P)
    g = gt.reshape(B, gt.shape[1], -1).astype(np.float32)  # (B, S, P)
    inter = np.einsum("bkp,bsp->bks", p, g).astype(np.float64)  # (B, K, S)
    union = p.sum(-1)[:, :, None] + g.sum(-1)[:, None, :] - inter  # (B, K, S)
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def hungarian(score: np.ndarray) -> np.ndarray:
    """Capsule index for each column of a (K, S') score matrix, maximising the total.

    Columns left without a capsule (only when K < S') get -1.
    """
    rows, cols = linear_sum_assignment(score, maximize=True)
    out = np.full(score.shape[1], -1, dtype=np.int64)
    out[cols] = rows
    return out


def visible_masks(visible: np.ndarray) -> np.ndarray:
    """Lambda+_k normalised over k, then thresholded: (B, K, H, W) float -> bool.

    The normalisation makes the rule independent of whether a method's visibility
    already sums to one (softmax layering) or not.
    """
    total = visible.sum(axis=1, keepdims=True)  # (B, 1, H, W)
    norm = visible / np.maximum(total, 1e-12)  # (B, K, H, W)
    return norm > THRESHOLD


def slot_masks(visible_map: np.ndarray) -> np.ndarray:
    """The `visible` label map (B, H, W) uint8 as one bool mask per slot (B, S, H, W)."""
    labels = np.arange(S, dtype=visible_map.dtype) + 1  # slot s is s + 1
    return visible_map[:, None, :, :] == labels[None, :, None, None]


@dataclass
class SegmentationScore:
    """Amodal and visible IoU of K predicted masks against the S shape slots."""

    K: int
    amodal_sum: np.ndarray = field(init=False)  # (K, S) sum of per-image amodal IoU
    visible_sum: np.ndarray = field(init=False)  # (K, S) same for visible masks
    count: np.ndarray = field(init=False)  # (S,) images where the slot is present
    per_image_amodal: np.ndarray = field(init=False)  # (S,) IoU sums, per-image matching
    per_image_visible: np.ndarray = field(init=False)  # (S,)

    def __post_init__(self) -> None:
        self.amodal_sum = np.zeros((self.K, S))
        self.visible_sum = np.zeros((self.K, S))
        self.count = np.zeros(S, dtype=np.int64)
        self.per_image_amodal = np.zeros(S)
        self.per_image_visible = np.zeros(S)

    def update(self, masks: np.ndarray, visible: np.ndarray, gt_amodal: np.ndarray,
               gt_visible: np.ndarray, present: np.ndarray) -> None:
        """Add a batch.

        Args:
            masks: (B, K, H, W) amodal probabilities Lambda_k.
            visible: (B, K, H, W) visibility Lambda+_k (normalised here).
            gt_amodal: (B, S, H, W) bool.
            gt_visible: (B, H, W) uint8 label map (0 background, s + 1 slot s).
            present: (B, S) bool.
        """
        if masks.shape[1] != self.K:
            raise ValueError(f"expected {self.K} capsules, got {masks.shape[1]}")
        amodal_iou = iou_matrix(masks > THRESHOLD, gt_amodal)  # (B, K, S)
        visible_iou = iou_matrix(visible_masks(visible), slot_masks(gt_visible))  # (B, K, S)
        w = present[:, None, :].astype(np.float64)  # (B, 1, S)
        self.amodal_sum += (amodal_iou * w).sum(0)
        self.visible_sum += (visible_iou * w).sum(0)
        self.count += present.sum(0)
        for b in range(masks.shape[0]):
            slots = np.flatnonzero(present[b])
            caps = hungarian(amodal_iou[b][:, slots])  # (S',)
            ok = caps >= 0
            self.per_image_amodal[slots[ok]] += amodal_iou[b, caps[ok], slots[ok]]
            self.per_image_visible[slots[ok]] += visible_iou[b, caps[ok], slots[ok]]

    def mean_matrix(self) -> np.ndarray:
        """(K, S) mean amodal IoU over the images where each slot is present."""
        return self.amodal_sum / np.maximum(self.count, 1)[None, :]

    def assignment(self) -> np.ndarray:
        """Fixed assignment: the capsule for each slot, (S,) (-1 if K < S)."""
        return hungarian(self.mean_matrix())

    def compute(self) -> dict:
        """Per-class and "all" IoU for both matchings, plus the assignment itself."""
        caps = self.assignment()  # (S,)
        ok = caps >= 0
        fixed_a, fixed_v = np.zeros(S), np.zeros(S)
        fixed_a[ok] = self.amodal_sum[caps[ok], np.flatnonzero(ok)]
        fixed_v[ok] = self.visible_sum[caps[ok], np.flatnonzero(ok)]
        return {
            "amodal_iou": _per_class(fixed_a, self.count),
            "amodal_iou_per_image": _per_class(self.per_image_amodal, self.count),
            "visible_iou": _per_class(fixed_v, self.count),
            "visible_iou_per_image": _per_class(self.per_image_visible, self.count),
            "assignment": {SLOTS[s]: int(caps[s]) for s in range(S)},
            "count": {SLOTS[s]: int(self.count[s]) for s in range(S)},
        }


def _per_class(sums: np.ndarray, count: np.ndarray) -> dict:
    """Mean per slot and over all present (image, slot) pairs; None where never present."""
    out = {SLOTS[s]: (float(sums[s] / count[s]) if count[s] else None) for s in range(S)}
    out["all"] = float(sums.sum() / count.sum()) if count.sum() else None
    return out


@dataclass
class FlowScore:
    """Mean end-point error in pixels, over all pixels and over gt-foreground pixels."""

    err_sum: float = 0.0
    n: int = 0
    fg_err_sum: float = 0.0
    fg_n: int = 0

    def update(self, pred: np.ndarray, gt: np.ndarray, gt_visible: np.ndarray) -> None:
        """Add a batch.

        Args:
            pred: (B, 2, H, W) predicted flow, (dx, dy) pixels on frame 0's grid.
            gt: (B, H, W, 2) dataset `flow` for frame 0 -> 1 (geogen.schema convention).
            gt_visible: (B, H, W) label map; foreground is != BACKGROUND.
        """
        diff = np.moveaxis(pred, 1, -1).astype(np.float64) - gt  # (B, H, W, 2)
        epe = np.sqrt((diff ** 2).sum(-1))  # (B, H, W)
        fg = gt_visible != BACKGROUND  # (B, H, W)
        self.err_sum += float(epe.sum())
        self.n += epe.size
        self.fg_err_sum += float(epe[fg].sum())
        self.fg_n += int(fg.sum())

    def compute(self) -> dict:
        return {"epe": self.err_sum / self.n if self.n else None,
                "epe_fg": self.fg_err_sum / self.fg_n if self.fg_n else None}


def adjusted_rand_index(labels_true: np.ndarray, labels_pred: np.ndarray) -> float:
    """ARI of two flat integer labelings (Hubert and Arabie), as sklearn defines it.

    Written on the contingency table so that 10k per-image calls stay cheap;
    tested against sklearn.metrics.adjusted_rand_score.
    """
    n = labels_true.size
    _, t = np.unique(labels_true, return_inverse=True)
    _, p = np.unique(labels_pred, return_inverse=True)
    table = np.zeros((t.max() + 1 if n else 0, p.max() + 1 if n else 0), dtype=np.int64)
    np.add.at(table, (t, p), 1)
    comb = lambda x: (x * (x - 1) // 2).sum()  # noqa: E731  (pairs within each cell)
    sum_cells = comb(table)
    sum_rows, sum_cols = comb(table.sum(1)), comb(table.sum(0))
    total = n * (n - 1) // 2
    # sklearn's special cases: identical trivial partitions (one cluster, or all
    # singletons) score 1, where the formula below divides 0 by 0.
    if total == 0 or sum_rows == sum_cols == sum_cells:
        return 1.0
    expected = sum_rows * sum_cols / total
    max_index = (sum_rows + sum_cols) / 2
    return float((sum_cells - expected) / (max_index - expected))


@dataclass
class AriScore:
    """Mean foreground ARI of the visible segmentation (argmax over k) per image."""

    total: float = 0.0
    n: int = 0

    def update(self, visible: np.ndarray, gt_visible: np.ndarray) -> None:
        """Add a batch: visible (B, K, H, W) Lambda+_k, gt_visible (B, H, W) label map.

        Images without foreground are skipped (ARI over zero pixels is meaningless).
        """
        seg = visible.argmax(axis=1)  # (B, H, W)
        for b in range(seg.shape[0]):
            fg = gt_visible[b] != BACKGROUND  # (H, W)
            if fg.any():
                self.total += adjusted_rand_index(gt_visible[b][fg], seg[b][fg])
                self.n += 1

    def compute(self) -> dict:
        return {"fg_ari": self.total / self.n if self.n else None}
