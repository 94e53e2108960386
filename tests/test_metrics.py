import itertools

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from benchmark import metrics
from benchmark.metrics import AriScore, FlowScore, SegmentationScore


def _rect(h, w, r0, r1, c0, c1):
    m = np.zeros((h, w), bool)
    m[r0:r1, c0:c1] = True
    return m


def test_iou_matrix_hand_worked():
    left = _rect(4, 4, 0, 4, 0, 2)  # 8 pixels
    corner = _rect(4, 4, 0, 2, 0, 2)  # 4 pixels
    empty = np.zeros((4, 4), bool)
    top = _rect(4, 4, 0, 2, 0, 4)  # 8 pixels
    pred = np.stack([left, corner, empty])[None]  # (1, 3, 4, 4)
    gt = np.stack([top, empty, empty])[None]  # (1, 3, 4, 4)
    iou = metrics.iou_matrix(pred, gt)
    # left vs top: 4 shared of 12; corner vs top: 4 of 8; empty vs empty agrees.
    assert iou[0, 0, 0] == pytest.approx(1 / 3)
    assert iou[0, 1, 0] == pytest.approx(0.5)
    assert iou[0, 2, 0] == 0.0
    assert iou[0, 2, 1] == 1.0 and iou[0, 0, 1] == 0.0


def test_hungarian_matches_brute_force():
    rng = np.random.default_rng(0)
    for K in (3, 5):
        score = rng.random((K, 3))
        best = max(itertools.permutations(range(K), 3),
                   key=lambda p: sum(score[p[s], s] for s in range(3)))
        assert tuple(metrics.hungarian(score)) == best
    # Fewer capsules than slots: one slot is left without a capsule.
    assert sorted(metrics.hungarian(np.eye(2, 3))) == [-1, 0, 1]


def _scene():
    """Circle = left column block, square = right block, triangle = bottom row (no overlap)."""
    c, s, t = _rect(4, 4, 0, 3, 0, 2), _rect(4, 4, 0, 3, 2, 4), _rect(4, 4, 3, 4, 0, 4)
    return c, s, t


def test_fixed_and_per_image_assignment_hand_worked():
    c, s, t = _scene()
    empty = np.zeros_like(c)
    # Images 0 and 1: capsule 0 = circle, 1 = square. Image 2: the two swapped.
    # Triangle only in image 2, where capsule 2 draws it exactly.
    masks = np.stack([np.stack([c, s, empty]), np.stack([c, s, empty]),
                      np.stack([s, c, t])]).astype(np.float32)  # (3, 3, 4, 4)
    gt = np.stack([np.stack([c, s, empty])] * 2 + [np.stack([c, s, t])])
    present = np.array([[1, 1, 0], [1, 1, 0], [1, 1, 1]], bool)
    vis_map = (c * 1 + s * 2 + t * 3).astype(np.uint8)
    vis_map = np.stack([np.where(t, 0, vis_map).astype(np.uint8)] * 2 + [vis_map])
    score = SegmentationScore(K=3)
    score.update(masks, masks, gt, vis_map, present)
    out = score.compute()
    # Mean matrix: capsule 0 is the circle in 2 of 3 images -> 2/3, and so on.
    assert score.mean_matrix()[0, 0] == pytest.approx(2 / 3)
    assert out["assignment"] == {"circle": 0, "square": 1, "triangle": 2}
    a = out["amodal_iou"]
    assert a["circle"] == pytest.approx(2 / 3) and a["square"] == pytest.approx(2 / 3)
    assert a["triangle"] == pytest.approx(1.0)
    # "all" is over the 7 present (image, slot) pairs, not the mean of the 3 classes.
    assert a["all"] == pytest.approx((2 / 3 * 3 + 2 / 3 * 3 + 1) / 7)
    assert out["amodal_iou_per_image"]["all"] == pytest.approx(1.0)
    assert out["visible_iou"]["all"] == pytest.approx(a["all"])
    assert out["count"] == {"circle": 3, "square": 3, "triangle": 1}


def test_visible_masks_are_normalised_before_threshold():
    vis = np.zeros((1, 3, 1, 2), np.float32)
    vis[0, :, 0, 0] = [0.3, 0.3, 0.0]  # a tie: neither is above 0.5 after normalising
    vis[0, :, 0, 1] = [0.2, 0.05, 0.05]  # small but dominant: 0.67 after normalising
    m = metrics.visible_masks(vis)
    assert not m[0, :, 0, 0].any()
    assert m[0, :, 0, 1].tolist() == [True, False, False]


def test_visible_iou_uses_occlusion_labels():
    c, s, t = _scene()
    # The square is drawn in front of the whole circle area: visible circle is empty.
    vis_map = np.where(s | c, 2, 0).astype(np.uint8)[None]  # (1, 4, 4)
    gt = np.stack([c, s | c, t])[None]
    present = np.array([[1, 1, 0]], bool)
    masks = np.stack([c, s | c, np.zeros_like(c)]).astype(np.float32)[None]
    visible = np.stack([np.zeros_like(c), s | c, np.zeros_like(c)]).astype(np.float32)[None]
    score = SegmentationScore(K=3)
    score.update(masks, visible, gt, vis_map, present)
    v = score.compute()["visible_iou"]
    # Circle: predicted visible empty and gt visible empty -> agree (1); square exact.
    assert v["circle"] == 1.0 and v["square"] == 1.0 and v["triangle"] is None


def test_flow_epe_hand_worked_and_layout():
    pred = np.zeros((1, 2, 2, 2), np.float32)
    pred[0, 0, 0, 0], pred[0, 1, 0, 0] = 3.0, 4.0  # (dx, dy) = (3, 4) at pixel (x=0, y=0)
    gt = np.zeros((1, 2, 2, 2), np.float32)  # (B, H, W, 2)
    vis = np.zeros((1, 2, 2), np.uint8)
    vis[0, 0, 0] = 1
    f = FlowScore()
    f.update(pred, gt, vis)
    out = f.compute()
    assert out["epe"] == pytest.approx(5 / 4) and out["epe_fg"] == pytest.approx(5.0)
    # Channel order matters: gt (dx, dy) = (3, 4) on the same pixel gives zero error.
    gt[0, 0, 0] = [3.0, 4.0]
    f = FlowScore()
    f.update(pred, gt, vis)
    assert f.compute()["epe"] == 0.0


def test_ari_hand_worked_and_against_sklearn():
    assert metrics.adjusted_rand_index(np.array([0, 0, 1, 1]), np.array([0, 0, 0, 1])) == \
        pytest.approx(0.0)
    assert metrics.adjusted_rand_index(np.array([0, 0, 1, 1]), np.array([5, 5, 2, 2])) == 1.0
    rng = np.random.default_rng(1)
    cases = [(np.zeros(5, int), np.zeros(5, int)), (np.arange(4), np.arange(4)),
             (np.zeros(3, int), np.arange(3)), (np.array([1]), np.array([0]))]
    for n, kt, kp in [(50, 3, 8), (200, 2, 2), (30, 5, 1), (10, 10, 10)]:
        cases.append((rng.integers(0, kt, n), rng.integers(0, kp, n)))
    for t, p in cases:
        assert metrics.adjusted_rand_index(t, p) == pytest.approx(adjusted_rand_score(t, p))


def test_foreground_ari_ignores_background_and_label_names():
    gt = np.array([[[0, 1, 1], [0, 2, 2]]], np.uint8)  # (1, 2, 3)
    vis = np.zeros((1, 4, 2, 3), np.float32)
    vis[0, 3, 0, :] = 1.0  # capsule 3 holds the top row, background included
    vis[0, 1, 1, :] = 1.0  # capsule 1 the bottom row
    a = AriScore()
    a.update(vis, gt)
    assert a.compute()["fg_ari"] == 1.0
    vis[0, :, 1, 2] = [0, 0, 0, 1]  # one square pixel now joins the circle's capsule
    a = AriScore()
    a.update(vis, gt)
    want = adjusted_rand_score([1, 1, 2, 2], [3, 3, 1, 3])
    assert a.compute()["fg_ari"] == pytest.approx(want) and want < 1
