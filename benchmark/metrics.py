"""Part metrics over numpy arrays: mask IoU with capsule-to-slot matching, flow EPE, ARI.

Letters: B images in a batch, K capsules (predicted parts), S ground-truth slots (the data's:
Geo's 3 shapes, the articulated figure's 10 parts; its manifest names them), G scored targets
(the slots, or groups of them), T thresholds of the sweep, H, W image side, P = H * W pixels.

Every metric is an accumulator over sufficient statistics, so 10k test images are
scored batch by batch with memory independent of N:

- `SegmentationScore` keeps, for amodal and visible masks, the (K, S) sums of
  per-image IoU over the images where slot s is present (visible: one per threshold of
  the sweep), the per-slot counts, the per-slot sums under per-image Hungarian matching,
  the per-slot sums of the best visible overlap (mBO) and of the ceiling.
- `FlowScore` keeps end-point-error sums and pixel counts.
- `AriScore` keeps the sum of per-image foreground ARI and the image count.

Conventions (the same for every method; the paper's rule for visibility masks: normalise,
then threshold at 0.5):
- A mask pixel is "on" when its value is > 0.5. Each method hands over its maps already
  normalised in its own way (its adapter says how: a softmax share of the pixel, EM
  responsibilities, a motion magnitude over its own maximum), and the metrics threshold
  them as given, so one method's masks may overlap where its maps say so.
- IoU of two empty masks is 1 (they agree); the ground truth of a present slot is
  never empty in practice, so this only matters for degenerate inputs.
- A slot's IoU is averaged over the images where it is present (`present`, from the
  dataset; a fully occluded slot still counts for the visible IoU, where an empty
  prediction scores 1).
- "all" is the mean over present (image, slot) pairs, not the mean of the three
  per-class numbers: circle is present in every image, so it weighs more.
- Targets: by default each slot is one target. A grouping (`members`) scores unions of slots
  instead, e.g. a whole leg for the upper and lower leg: its amodal mask is the union of its
  slots' amodal masks, its visible mask the union of their visible masks, and it is present
  where any of its slots is; the matching and every number above then run over the groups.
- Fixed assignment: one capsule per slot, chosen once by Hungarian matching
  (maximising) on the test-set mean IoU matrix; capsule identities are meant to be
  stable across images. Amodal and visible IoU each choose their own, on their own
  matrix, so the visible IoU of a visible-only method and of an amodal one are scored
  the same way. Per-image assignment: Hungarian on each image's IoU matrix over its
  present slots (it forgives methods whose groups are interchangeable).
- The sweep: the visible IoU (fixed assignment, each threshold choosing its own) at
  thresholds 0.3, 0.5 and 0.7; how far it moves says how soft a method's maps are.
- mBO (mean best overlap): for each slot with a non-empty visible mask, the best visible
  IoU of any of the K masks, averaged; no assignment, so a mask may serve two slots.
- Ceiling: the ground-truth visible mask of each present slot scored against its amodal
  mask. It is what a perfect visible-only segmentation scores against the amodal truth.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

from geogen.schema import BACKGROUND, SLOTS

THRESHOLD = 0.5  # a value above this puts the pixel inside the mask
SWEEP = (0.3, 0.5, 0.7)  # the thresholds of the visible IoU sweep
MAIN = SWEEP.index(THRESHOLD)  # the sweep's entry that is the visible IoU itself
# What the records' segmentation numbers mean: 2 = the rules above. Records without the
# field were scored under rule 1 (visible maps normalised over k by the metrics before the
# threshold; the visible IoU taken at the amodal assignment; no sweep, mBO or ceiling).
SEGMENTATION_RULE = 2


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


def visible_masks(visible: np.ndarray, threshold: float = THRESHOLD) -> np.ndarray:
    """A method's visibility maps, normalised by the method, thresholded: (B, K, H, W) -> bool."""
    return visible > threshold


def slot_masks(visible_map: np.ndarray, slots: int = len(SLOTS)) -> np.ndarray:
    """The `visible` label map (B, H, W) uint8 as one bool mask per slot (B, S, H, W)."""
    labels = np.arange(slots, dtype=visible_map.dtype) + 1  # slot s is s + 1
    return visible_map[:, None, :, :] == labels[None, :, None, None]


def group_masks(masks: np.ndarray, members: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """Per-slot values (B, S, ...) bool -> per-group unions (B, G, ...)."""
    return np.stack([masks[:, list(m)].any(1) for m in members], 1)


def _per_image_matched(iou: np.ndarray, present: np.ndarray) -> np.ndarray:
    """(S,) sums over the batch of the IoU under each image's own Hungarian matching.

    iou: (B, K, S); present: (B, S) bool.
    """
    out = np.zeros(iou.shape[2])
    for b in range(iou.shape[0]):
        slots = np.flatnonzero(present[b])
        caps = hungarian(iou[b][:, slots])  # (S',)
        ok = caps >= 0
        out[slots[ok]] += iou[b, caps[ok], slots[ok]]
    return out


@dataclass
class SegmentationScore:
    """Amodal and visible IoU of K predicted masks against G targets: the data's S slots
    (`names` the slot names), or groups of them (`members`: each group's slot indices).
    The sums below are over targets; S in their shapes reads G under a grouping."""

    K: int
    names: tuple[str, ...] = SLOTS
    members: tuple[tuple[int, ...], ...] | None = None
    amodal_sum: np.ndarray = field(init=False)  # (K, S) sum of per-image amodal IoU
    visible_sum: np.ndarray = field(init=False)  # (T, K, S) same for visible masks, per threshold
    count: np.ndarray = field(init=False)  # (S,) images where the slot is present
    per_image_amodal: np.ndarray = field(init=False)  # (S,) IoU sums, per-image matching
    per_image_visible: np.ndarray = field(init=False)  # (S,)
    best_visible: np.ndarray = field(init=False)  # (S,) sums of the best visible IoU (mBO)
    seen: np.ndarray = field(init=False)  # (S,) images where the slot's visible mask is not empty
    ceiling_sum: np.ndarray = field(init=False)  # (S,) IoU of gt visible against gt amodal

    def __post_init__(self) -> None:
        if self.members is not None and len(self.members) != len(self.names):
            raise ValueError(f"{len(self.names)} target names for {len(self.members)} groups")
        S = len(self.names)
        self.amodal_sum = np.zeros((self.K, S))
        self.visible_sum = np.zeros((len(SWEEP), self.K, S))
        self.count = np.zeros(S, dtype=np.int64)
        self.per_image_amodal = np.zeros(S)
        self.per_image_visible = np.zeros(S)
        self.best_visible = np.zeros(S)
        self.seen = np.zeros(S, dtype=np.int64)
        self.ceiling_sum = np.zeros(S)

    def update(self, masks: np.ndarray, visible: np.ndarray, gt_amodal: np.ndarray,
               gt_visible: np.ndarray, present: np.ndarray) -> None:
        """Add a batch.

        Args:
            masks: (B, K, H, W) amodal values Lambda_k in [0, 1].
            visible: (B, K, H, W) visibility Lambda+_k in [0, 1], normalised by the method.
            gt_amodal: (B, S, H, W) bool.
            gt_visible: (B, H, W) uint8 label map (0 background, s + 1 slot s).
            present: (B, S) bool.
        """
        if masks.shape[1] != self.K:
            raise ValueError(f"expected {self.K} capsules, got {masks.shape[1]}")
        gt_vis = slot_masks(gt_visible, gt_amodal.shape[1])  # (B, S, H, W)
        if self.members is not None:  # each group: the union of its slots
            gt_amodal = group_masks(gt_amodal, self.members)  # (B, G, H, W)
            gt_vis = group_masks(gt_vis, self.members)  # (B, G, H, W)
            present = group_masks(present, self.members)  # (B, G)
        if gt_amodal.shape[1] != len(self.names):
            raise ValueError(f"expected {len(self.names)} ground-truth slots, "
                             f"got {gt_amodal.shape[1]}")
        w = present[:, None, :].astype(np.float64)  # (B, 1, S)
        amodal_iou = iou_matrix(masks > THRESHOLD, gt_amodal)  # (B, K, S)
        self.amodal_sum += (amodal_iou * w).sum(0)
        sweep = [iou_matrix(visible_masks(visible, t), gt_vis) for t in SWEEP]  # T x (B, K, S)
        self.visible_sum += (np.stack(sweep) * w[None]).sum(1)
        visible_iou = sweep[MAIN]  # (B, K, S)
        self.count += present.sum(0)
        self.per_image_amodal += _per_image_matched(amodal_iou, present)
        self.per_image_visible += _per_image_matched(visible_iou, present)
        shown = present & gt_vis.any(axis=(2, 3))  # (B, S) slots with visible pixels
        self.best_visible += (visible_iou.max(1) * shown).sum(0)
        self.seen += shown.sum(0)
        ceiling = iou_matrix(gt_vis, gt_amodal)  # (B, S, S); the diagonal pairs slot s with s
        self.ceiling_sum += (np.diagonal(ceiling, axis1=1, axis2=2) * present).sum(0)

    def mean_matrix(self) -> np.ndarray:
        """(K, S) mean amodal IoU over the images where each slot is present."""
        return self.amodal_sum / np.maximum(self.count, 1)[None, :]

    def assignment(self) -> np.ndarray:
        """Fixed assignment on the amodal masks: the capsule for each slot, (S,) (-1 if K < S)."""
        return hungarian(self.mean_matrix())

    def _per_class(self, sums: np.ndarray, count: np.ndarray) -> dict:
        return _per_class(sums, count, self.names)

    def compute(self) -> dict:
        """Per-class and "all" numbers for both matchings, the sweep, mBO, the ceiling and
        both fixed assignments."""
        caps = self.assignment()  # (S,)
        per_count = np.maximum(self.count, 1)[None, :]  # (1, S)
        vcaps = [hungarian(sums / per_count) for sums in self.visible_sum]  # T x (S,)
        names, per = self.names, self._per_class
        sweep = {f"{t:.1f}": per(_fixed(sums, c), self.count)
                 for t, sums, c in zip(SWEEP, self.visible_sum, vcaps)}
        visible_caps = vcaps[MAIN]  # (S,)
        return {
            "segmentation_rule": SEGMENTATION_RULE,
            "amodal_iou": per(_fixed(self.amodal_sum, caps), self.count),
            "amodal_iou_per_image": per(self.per_image_amodal, self.count),
            "visible_iou": sweep[f"{THRESHOLD:.1f}"],  # the sweep's 0.5 entry
            "visible_iou_per_image": per(self.per_image_visible, self.count),
            "visible_iou_sweep": sweep,
            "visible_mbo": per(self.best_visible, self.seen),
            "ceiling": per(self.ceiling_sum, self.count),
            "assignment": {n: int(caps[s]) for s, n in enumerate(names)},
            "visible_assignment": {n: int(visible_caps[s]) for s, n in enumerate(names)},
            "count": {n: int(self.count[s]) for s, n in enumerate(names)},
            "visible_count": {n: int(self.seen[s]) for s, n in enumerate(names)},
        }


def _fixed(sums: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """(S,) IoU sums of the assigned capsule of each slot; 0 where a slot has none."""
    out = np.zeros(len(caps))
    ok = caps >= 0
    out[ok] = sums[caps[ok], np.flatnonzero(ok)]
    return out


def _per_class(sums: np.ndarray, count: np.ndarray, names: tuple[str, ...] = SLOTS) -> dict:
    """Mean per slot and over all present (image, slot) pairs; None where never present."""
    out = {n: (float(sums[s] / count[s]) if count[s] else None) for s, n in enumerate(names)}
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
