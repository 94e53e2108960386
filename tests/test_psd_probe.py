"""The PSD probe: part IoUs and the structure by parts on a hand-made case, and the probe of a
small model (its keys, its sizes, the model's mode left as it was)."""
import numpy as np
import pytest
import torch

from baselines.psd.config import ModelConfig
from baselines.psd.model import PSD
from baselines.psd.probe import image_ious, probe, summarise

PARTS = ("circle", "square", "triangle")


def _hand_case():
    """Two 4x4 images. The first: the circle the left column pair, the square the top right
    2x2, the triangle the bottom right 2x2; dimension 7 covers the circle and one square
    pixel, dimension 2 the square and the triangle's top row. The second: the circle alone
    (the other parts absent), which no dimension covers."""
    visible = np.zeros((2, 4, 4), np.uint8)
    visible[:, :, :2] = 1
    visible[0, :2, 2:] = 2
    visible[0, 2:, 2:] = 3
    masks = np.zeros((2, 2, 4, 4), bool)  # (N, A, H, W), A = dims 7, 2
    masks[0, 0, :, :2] = True
    masks[0, 0, 0, 2] = True
    masks[0, 1, :3, 2:] = True
    return masks, visible


def test_ious_average_over_the_images_where_a_part_is_visible():
    masks, visible = _hand_case()
    total, count = image_ious(masks, visible, 3)
    assert count.tolist() == [2, 1, 1]
    assert np.allclose(total, [[8 / 9, 1 / 12, 0], [0, 4 / 6, 2 / 8]])


def test_summary_names_parts_and_structure_by_the_assignment():
    masks, visible = _hand_case()
    total, count = image_ious(masks, visible, 3)
    kl = np.zeros(8)
    kl[7], kl[2] = 4.0, 1.5
    structure = np.array([[0.0, 0.95], [0.1, 0.0]])  # parent row 7, child column 2
    out = summarise(kl, [7, 2], total / count, structure, PARTS, pairs=2, threshold=0.5)
    first, second = out["dims"]
    assert first["dim"] == 7 and first["part"] == "circle"
    assert first["iou"] == pytest.approx(8 / 9 / 2, abs=1e-4)  # 0 on the second image
    assert second["part"] == "square" and second["iou"] == pytest.approx(4 / 6, abs=1e-4)
    assert second["iou_by_part"]["triangle"] == 0.25
    assert out["assignment"] == {"circle": 7, "square": 2}  # two dims: the triangle unassigned
    assert out["structure_by_part"] == {"circle->square": 0.95, "square->circle": 0.1}
    assert out["kl"][7] == 4.0 and len(out["kl"]) == 8 and out["active_dims"] == [7, 2]


def test_probe_of_a_small_model():
    torch.manual_seed(0)
    model = PSD(ModelConfig(image_size=32, latent_dim=5, kernel_hidden=(8,), unet_width=4,
                            motion_kernels=(3,)))
    model.set_active([3, 1])
    with torch.no_grad():
        model.structure.logits[3, 1] = 2.0  # parent 3, child 1
    rng = np.random.default_rng(0)
    frame0 = rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)
    flow = rng.normal(0, 2, (6, 32, 32, 2)).astype(np.float16)
    visible = rng.integers(0, 4, (6, 32, 32), dtype=np.uint8)
    model.train()
    out = probe(model, frame0, flow, visible)
    assert model.training  # left as it was
    assert out["pairs"] == 6 and len(out["kl"]) == 5 and out["active_dims"] == [1, 3]
    assert np.array(out["structure"]).shape == (2, 2)
    assert all(0 <= d["iou"] <= 1 and d["part"] in PARTS for d in out["dims"])
    assert out["structure"] == [[0.0, 0.0], [round(1 / (1 + np.exp(-2.0)), 4), 0.0]]


def _coded_case(n=600):
    """Dimension 5 codes the circle's motion non-linearly, dimension 9 the square's (noise where
    the square is absent), dimension 2 nothing; the triangle's motion is in no dimension."""
    rng = np.random.default_rng(1)
    motions = rng.uniform(-6, 6, (n, 3))  # (N, S)
    present = np.c_[np.ones(n, bool), rng.random(n) < 0.7, rng.random(n) < 0.7]  # (N, S)
    mean = np.stack([np.tanh(motions[:, 0] / 3) + rng.normal(0, 0.02, n),
                     np.where(present[:, 1], motions[:, 1], rng.normal(0, 3, n)),
                     rng.normal(0, 1, n)], -1)  # (N, A)
    return mean, [5, 9, 2], motions, present


def test_factor_codes_name_the_part_motion_each_dimension_holds():
    from baselines.psd.probe import factor_codes
    mean, active, motions, present = _coded_case()
    out = factor_codes(mean, active, motions, present, PARTS)
    by_dim = {d["dim"]: d for d in out["dims"]}
    assert by_dim[5]["part"] == "circle" and by_dim[5]["r2"]["circle"] > 0.9
    assert by_dim[9]["part"] == "square" and by_dim[9]["r2"]["square"] > 0.95
    assert max(by_dim[2]["r2"].values()) < 0.1
    assert out["held"]["square"] > 0.95 and out["held"]["circle"] > 0.85
    assert out["held"]["triangle"] < 0.05
    # Only pairs with the part present count: garbage motions of absent parts change nothing.
    spoilt = motions.copy()
    spoilt[~present] = 1e3
    assert factor_codes(mean, active, spoilt, present, PARTS) == out


def test_binned_r2_needs_two_samples_a_bin():
    from baselines.psd.probe import binned_r2
    x = np.arange(19.0)
    assert binned_r2(x, x) == 0.0 and binned_r2(np.arange(20.0), np.arange(20.0)) > 0.9
