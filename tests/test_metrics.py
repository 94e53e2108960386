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


def test_visible_maps_are_thresholded_as_the_method_normalised_them():
    vis = np.zeros((1, 3, 1, 2), np.float32)
    vis[0, :, 0, 0] = [0.6, 0.6, 0.0]  # two maps each over 1/2: the pixel is in both masks
    vis[0, :, 0, 1] = [0.2, 0.05, 0.05]  # dominant but under 1/2: in no mask
    m = metrics.visible_masks(vis)
    assert m[0, :, 0, 0].tolist() == [True, True, False]
    assert not m[0, :, 0, 1].any()


def _occluded_scene():
    """4 x 4: a circle (rows 0-1, cols 0-2) and a square (cols 2-3) sharing two pixels. Image 0:
    the square in front, no triangle. Image 1: the circle in front, and a triangle (row 3, cols
    2-3) wholly under the square."""
    circle, square, row3 = _rect(4, 4, 0, 2, 0, 3), _rect(4, 4, 0, 4, 2, 4), _rect(4, 4, 3, 4, 0, 4)
    empty = np.zeros_like(circle)
    amodal = np.stack([np.stack([circle, square, empty]),
                       np.stack([circle, square, row3 & square])])  # (2, 3, 4, 4)
    labels = np.zeros((2, 4, 4), np.uint8)
    labels[0][circle] = 1
    labels[0][square] = 2  # the square is in front of the circle's third column
    labels[1][square] = 2  # the triangle's pixels all lie under the square
    labels[1][circle] = 1
    present = np.array([[1, 1, 0], [1, 1, 1]], bool)
    return amodal, labels, present


def test_ceiling_of_visible_masks_against_amodal_truth_hand_worked():
    amodal, labels, present = _occluded_scene()
    score = SegmentationScore(K=1)
    zeros = np.zeros((2, 1, 4, 4), np.float32)
    score.update(zeros, zeros, amodal, labels, present)
    ceiling = score.compute()["ceiling"]
    # Circle: 4 of its 6 pixels show in image 0, all 6 in image 1; the square: all 8, then 6;
    # the hidden triangle shows none of its 2 pixels.
    assert ceiling["circle"] == pytest.approx((4 / 6 + 1) / 2)
    assert ceiling["square"] == pytest.approx((1 + 6 / 8) / 2) and ceiling["triangle"] == 0.0
    assert ceiling["all"] == pytest.approx((4 / 6 + 1 + 1 + 6 / 8 + 0) / 5)


def test_perfect_visible_predictions_score_one_for_every_slot():
    amodal, labels, present = _occluded_scene()
    truth = metrics.slot_masks(labels).astype(np.float32)  # (2, 3, 4, 4) the visible truth
    visible = np.concatenate([truth[:, ::-1], np.zeros((2, 1, 4, 4), np.float32)], 1)  # (2, 4, 4, 4)
    score = SegmentationScore(K=4)
    score.update(visible, visible, amodal, labels, present)
    out = score.compute()
    for key in ("visible_iou", "visible_iou_per_image"):
        assert out[key] == {"circle": 1.0, "square": 1.0, "triangle": 1.0, "all": 1.0}, key
    assert out["visible_assignment"] == {"circle": 2, "square": 1, "triangle": 0}
    # mBO counts only slots with visible pixels: the hidden triangle is not one of them.
    assert out["visible_mbo"] == {"circle": 1.0, "square": 1.0, "triangle": None, "all": 1.0}
    assert out["visible_count"] == {"circle": 2, "square": 2, "triangle": 0}
    # The same masks scored as amodal ones lose what the square hides.
    assert out["amodal_iou"]["circle"] == pytest.approx(out["ceiling"]["circle"])


def test_threshold_sweep_hand_worked():
    circle = _rect(4, 4, 0, 2, 0, 2)  # 4 pixels
    below = _rect(4, 4, 2, 4, 0, 2)  # 4 pixels under it
    soft = (0.6 * circle + 0.4 * below).astype(np.float32)[None, None]  # (1, 1, 4, 4)
    labels = circle.astype(np.uint8)[None]
    present = np.array([[1, 0, 0]], bool)
    score = SegmentationScore(K=1)
    score.update(soft, soft, np.stack([circle, circle, circle])[None], labels, present)
    sweep = score.compute()["visible_iou_sweep"]
    # 0.3 takes all 8 pixels (4 / 8), 0.5 the circle's 4 (1), 0.7 none (0).
    assert [sweep[t]["circle"] for t in ("0.3", "0.5", "0.7")] == [0.5, 1.0, 0.0]
    assert score.compute()["visible_iou"] == sweep["0.5"]


def test_mean_best_overlap_needs_no_assignment_hand_worked():
    circle, square = _rect(4, 4, 0, 2, 0, 2), _rect(4, 4, 0, 4, 2, 4)  # 4 and 8 pixels
    labels = (circle * 1 + square * 2).astype(np.uint8)[None]
    union, piece = circle | square, _rect(4, 4, 0, 1, 2, 4)  # 12 pixels; 2 of the square's
    visible = np.stack([union, piece]).astype(np.float32)[None]  # (1, 2, 4, 4)
    present = np.array([[1, 1, 0]], bool)
    score = SegmentationScore(K=2)
    score.update(visible, visible, np.stack([circle, square, circle])[None], labels, present)
    out = score.compute()
    # One to one, the union is worth more on the square (8/12) than the piece is (2/8), so the
    # circle gets the piece (0). The best overlap lets the union serve the circle too (4/12).
    assert out["visible_iou"]["circle"] == 0.0
    assert out["visible_iou"]["square"] == pytest.approx(8 / 12)
    assert out["visible_mbo"]["circle"] == pytest.approx(4 / 12)
    assert out["visible_mbo"]["square"] == pytest.approx(8 / 12)
    assert out["visible_mbo"]["all"] == pytest.approx((4 / 12 + 8 / 12) / 2)


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


def test_grouped_targets_score_the_union_of_their_slots():
    # Two slots (an upper and a lower leg) side by side, scored as one group "leg".
    gt = np.zeros((1, 2, 4, 4), bool)
    gt[0, 0, :2, :2] = True   # 4 pixels
    gt[0, 1, 2:, :2] = True   # 4 pixels
    labels = gt[:, 0] * 1 + gt[:, 1] * 2                       # visible label map (1, 4, 4)
    pred = np.zeros((1, 2, 4, 4), np.float32)
    pred[0, 0, :2, :2] = 1.0   # capsule 0 draws the upper leg only
    pred[0, 1] = gt[0, 0] | gt[0, 1]   # capsule 1 draws the whole leg
    present = np.ones((1, 2), bool)
    per_slot = SegmentationScore(K=2, names=("upper", "lower"))
    per_slot.update(pred, pred, gt, labels.astype(np.uint8), present)
    assert per_slot.compute()["amodal_iou"]["upper"] == pytest.approx(1.0)
    assert per_slot.compute()["amodal_iou"]["lower"] == pytest.approx(0.5)   # 4 of 8 pixels
    grouped = SegmentationScore(K=1, names=("leg",), members=((0, 1),))
    grouped.update(pred[:, :1], pred[:, :1], gt, labels.astype(np.uint8), present)
    assert grouped.compute()["amodal_iou"]["leg"] == pytest.approx(0.5)   # half the union
    both = SegmentationScore(K=2, names=("leg",), members=((0, 1),))
    both.update(pred, pred, gt, labels.astype(np.uint8), present)
    out = both.compute()
    assert out["amodal_iou"]["leg"] == pytest.approx(1.0) and out["assignment"] == {"leg": 1}
    assert out["ceiling"]["leg"] == pytest.approx(1.0)   # nothing of the leg is hidden
    with pytest.raises(ValueError, match="ground-truth slots"):
        SegmentationScore(K=2).update(pred, pred, gt, labels.astype(np.uint8), present)
