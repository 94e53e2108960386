"""A group of slots scored by the union of its slots' own capsules: the second number of the
articulated figure's whole-limb rows.

Table 1's rule scores one capsule per target, so a leg (upper and lower leg together) is
matched by a single capsule, and a model that gives the thigh and the shin a capsule each, as
their motions ask, scores about half there however good the halves are. This score keeps the
slot-level fixed assignment (one capsule per slot, `SegmentationScore.assignment`) and scores
each group by the union of its members' capsules, so a limb covered by its parts' capsules
scores high and a limb whose parts share one capsule scores as the rule does.

The assignment is known only after the whole test set, so `update` keeps, for every pair of
capsules (a, b) and each group g, the sum over images where g is present of
IoU(mask_a | mask_b, g) (a == b: the capsule alone); `compute` reads the entry the assignment
picks. Unions of two masks come from pairwise intersections (inclusion-exclusion), so a group
holds at most two slots; the articulated figure's groups hold one or two.

Letters: B images, K capsules, S slots, G groups, P = H * W pixels.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from benchmark.metrics import THRESHOLD, group_masks, slot_masks, visible_masks

MAX_MEMBERS = 2  # unions of two masks by inclusion-exclusion; see the module docstring


def union_iou(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Per image, IoU of the union of every pair of predicted masks with every target.

    Args:
        pred: (B, K, H, W) bool.
        gt: (B, G, H, W) bool.
    Returns:
        (B, K, K, G) float64; entry (a, a) is capsule a alone; 1 where both masks are empty.
    """
    B, K = pred.shape[:2]
    p = pred.reshape(B, K, -1).astype(np.float32)  # (B, K, P)
    g = gt.reshape(B, gt.shape[1], -1).astype(np.float32)  # (B, G, P)
    size = p.sum(-1).astype(np.float64)  # (B, K)
    both = np.einsum("bkp,blp->bkl", p, p).astype(np.float64)  # (B, K, K) |a & b|
    hit = np.einsum("bkp,bgp->bkg", p, g).astype(np.float64)  # (B, K, G) |a & g|
    pg = (p[:, :, None, :] * g[:, None, :, :]).reshape(B, K * g.shape[1], -1)  # (B, K*G, P)
    hit2 = (p @ pg.transpose(0, 2, 1)).reshape(B, K, K, -1).astype(np.float64)  # (B, K, K, G)
    inter = hit[:, :, None, :] + hit[:, None, :, :] - hit2  # (B, K, K, G) |(a | b) & g|
    either = size[:, :, None] + size[:, None, :] - both  # (B, K, K) |a | b|
    union = (either[..., None] + g.sum(-1)[:, None, None, :] - inter)  # (B, K, K, G)
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


@dataclass
class PartsUnionScore:
    """Amodal and visible IoU of each group against the union of its slots' assigned capsules."""

    K: int
    names: tuple[str, ...]
    members: tuple[tuple[int, ...], ...]
    amodal_sum: np.ndarray = field(init=False)  # (K, K, G) IoU sums of two capsules' union
    visible_sum: np.ndarray = field(init=False)  # (K, K, G) the same for visible masks
    count: np.ndarray = field(init=False)  # (G,) images where the group is present

    def __post_init__(self) -> None:
        if len(self.members) != len(self.names):
            raise ValueError(f"{len(self.names)} group names for {len(self.members)} groups")
        wide = [n for n, m in zip(self.names, self.members) if not 1 <= len(m) <= MAX_MEMBERS]
        if wide:
            raise ValueError(f"group {wide[0]!r} must hold 1 to {MAX_MEMBERS} slots for the "
                             f"parts-union score")
        G = len(self.names)
        self.amodal_sum = np.zeros((self.K, self.K, G))
        self.visible_sum = np.zeros((self.K, self.K, G))
        self.count = np.zeros(G, dtype=np.int64)

    def update(self, masks: np.ndarray, visible: np.ndarray, gt_amodal: np.ndarray,
               gt_visible: np.ndarray, present: np.ndarray) -> None:
        """Add a batch; the arguments are `SegmentationScore.update`'s (slots, not groups)."""
        gt_vis = group_masks(slot_masks(gt_visible, gt_amodal.shape[1]), self.members)
        gt_am = group_masks(gt_amodal, self.members)  # (B, G, H, W)
        w = group_masks(present, self.members)[:, None, None, :]  # (B, 1, 1, G)
        self.amodal_sum += (union_iou(masks > THRESHOLD, gt_am) * w).sum(0)
        self.visible_sum += (union_iou(visible_masks(visible, THRESHOLD), gt_vis) * w).sum(0)
        self.count += w[:, 0, 0].sum(0)

    def _picked(self, sums: np.ndarray, caps: np.ndarray) -> np.ndarray:
        """(G,) IoU sums of each group's members' capsules (caps: (S,), -1 where a slot has
        none: the group keeps its other member's capsule, or scores 0 with neither)."""
        out = np.zeros(len(self.names))
        for g, slots in enumerate(self.members):
            got = [int(caps[s]) for s in slots if caps[s] >= 0]
            if got:
                out[g] = sums[got[0], got[-1], g]
        return out

    def compute(self, assignment: dict[str, int], visible_assignment: dict[str, int],
                slots: tuple[str, ...]) -> dict:
        """Per group and "all" (over present (image, group) pairs), for the slot-level fixed
        assignments of `SegmentationScore.compute` (by slot name)."""
        caps = np.array([assignment[s] for s in slots])  # (S,)
        vcaps = np.array([visible_assignment[s] for s in slots])  # (S,)

        def per(sums: np.ndarray) -> dict:
            out = {n: (float(sums[g] / self.count[g]) if self.count[g] else None)
                   for g, n in enumerate(self.names)}
            out["all"] = float(sums.sum() / self.count.sum()) if self.count.sum() else None
            return out
        return {"amodal_iou": per(self._picked(self.amodal_sum, caps)),
                "visible_iou": per(self._picked(self.visible_sum, vcaps))}
