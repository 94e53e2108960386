import numpy as np
import pytest

from benchmark.metrics import SegmentationScore, iou_matrix
from benchmark.parts_union import PartsUnionScore, union_iou


def test_union_iou_matches_the_union_drawn_pixel_by_pixel():
    rng = np.random.default_rng(0)
    pred = rng.random((3, 4, 6, 6)) > 0.6  # (B, K, H, W)
    gt = rng.random((3, 2, 6, 6)) > 0.5  # (B, G, H, W)
    got = union_iou(pred, gt)  # (B, K, K, G)
    for a in range(4):
        for b in range(4):
            drawn = (pred[:, a] | pred[:, b])[:, None]  # (B, 1, H, W)
            np.testing.assert_allclose(got[:, a, b], iou_matrix(drawn, gt)[:, 0], rtol=1e-12)


def _figure():
    """A torso (slot 0) beside a leg of two slots (1 upper, 2 lower), 8 x 8, and four
    capsules: 0 the torso, 1 the upper leg, 2 the lower leg, 3 nothing."""
    gt = np.zeros((1, 3, 8, 8), bool)
    gt[0, 0, :, :4] = True   # torso, 32 pixels
    gt[0, 1, :4, 4:] = True  # upper leg, 16
    gt[0, 2, 4:, 4:] = True  # lower leg, 16
    labels = (gt[0] * np.arange(1, 4)[:, None, None]).sum(0)[None].astype(np.uint8)
    pred = np.zeros((1, 4, 8, 8), np.float32)
    pred[0, :3] = gt[0]
    return pred, gt, labels, np.ones((1, 3), bool)


def test_a_limb_split_between_its_parts_capsules_scores_whole():
    pred, gt, labels, present = _figure()
    names, members = ("torso", "leg"), ((0,), (1, 2))
    slots = ("torso", "upper", "lower")
    per_slot = SegmentationScore(K=4, names=slots)
    one_capsule = SegmentationScore(K=4, names=names, members=members)
    union = PartsUnionScore(K=4, names=names, members=members)
    for score in (per_slot, one_capsule, union):
        score.update(pred, pred, gt, labels, present)
    out = per_slot.compute()
    assert out["assignment"] == {"torso": 0, "upper": 1, "lower": 2}
    # Table 1's rule: one capsule for the whole leg, half of it
    assert one_capsule.compute()["amodal_iou"]["leg"] == pytest.approx(0.5)
    got = union.compute(out["assignment"], out["visible_assignment"], slots)
    assert got["amodal_iou"] == pytest.approx({"torso": 1.0, "leg": 1.0, "all": 1.0})
    assert got["visible_iou"] == pytest.approx({"torso": 1.0, "leg": 1.0, "all": 1.0})


def test_parts_sharing_one_capsule_score_as_the_one_capsule_rule():
    pred, gt, labels, present = _figure()
    pred[0, 1] = gt[0, 1] | gt[0, 2]  # capsule 1 draws the whole leg, capsule 2 nothing
    pred[0, 2] = 0.0
    slots = ("torso", "upper", "lower")
    union = PartsUnionScore(K=4, names=("torso", "leg"), members=((0,), (1, 2)))
    union.update(pred, pred, gt, labels, present)
    # the upper leg's capsule (1) and the lower leg's (2, empty): the union is capsule 1's leg
    got = union.compute({"torso": 0, "upper": 1, "lower": 2},
                        {"torso": 0, "upper": 1, "lower": 2}, slots)
    assert got["amodal_iou"]["leg"] == pytest.approx(1.0)
    # both slots given capsule 3 (empty): nothing of the leg
    got = union.compute({"torso": 0, "upper": 3, "lower": 3},
                        {"torso": 0, "upper": 3, "lower": 3}, slots)
    assert got["amodal_iou"]["leg"] == 0.0 and got["amodal_iou"]["all"] == pytest.approx(0.5)
    # a slot without a capsule (K < S) leaves the group its other member's capsule
    got = union.compute({"torso": 0, "upper": 1, "lower": -1},
                        {"torso": 0, "upper": -1, "lower": -1}, slots)
    assert got["amodal_iou"]["leg"] == pytest.approx(1.0) and got["visible_iou"]["leg"] == 0.0


def test_an_absent_group_is_left_out_of_all():
    pred, gt, labels, _ = _figure()
    present = np.array([[True, False, False]])  # the leg is not in the image
    union = PartsUnionScore(K=4, names=("torso", "leg"), members=((0,), (1, 2)))
    union.update(pred, pred, gt, labels, present)
    got = union.compute({"torso": 0, "upper": 3, "lower": 3},
                        {"torso": 0, "upper": 3, "lower": 3}, ("torso", "upper", "lower"))
    assert got["amodal_iou"]["leg"] is None and got["amodal_iou"]["all"] == pytest.approx(1.0)


def test_a_group_of_three_slots_is_refused():
    with pytest.raises(ValueError, match="1 to 2 slots"):
        PartsUnionScore(K=4, names=("arm",), members=((0, 1, 2),))
