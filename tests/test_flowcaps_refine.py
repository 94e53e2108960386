"""Test-time pose refinement: off is the identity, it recovers a known pose, and its band."""
import dataclasses

import pytest
import torch

from flowcaps import FlowcapsError, FlowCapsules, ModelConfig, RefineConfig, parse_refined, refine_poses
from flowcaps import geometry
from flowcaps.refine import edge_band

# Two capsules, the "over" layering; the decoder's disc prior makes each mask a soft disc.
SMALL = ModelConfig(image_size=32, num_capsules=2, capsule_dim=10, enc_channels=(4, 8),
                    enc_hidden=16, dec_hidden=8, dec_depth=2, layering="over", mask_prior=12.0)
COLOURS = torch.tensor([[0.9, 0.1, 0.1], [0.1, 0.2, 0.9]])  # (K, 3)


def _scene(model, pose, depth):
    """The image the model's own layered masks draw at `pose` with flat colours on black."""
    shape = torch.zeros(pose.shape[0], 2, SMALL.shape_dim)  # (B, K, C-5)
    u = geometry.pixel_centres(32, 32).expand(pose.shape[0], -1, -1)  # (B, P, 2)
    with torch.no_grad():
        vis = model.masks_at(shape, pose, depth, u).visible  # (B, K, P)
    img = torch.einsum("bkp,kc->bcp", vis, COLOURS).view(-1, 3, 32, 32)  # (B, 3, H, W)
    return img, shape


def test_refinement_recovers_a_shifted_and_scaled_pose():
    torch.manual_seed(0)
    model = FlowCapsules(SMALL).eval()
    true = torch.tensor([[[-0.3, -0.2, 0.0, 0.3], [0.3, 0.25, 0.0, 0.25]]])  # (1, K, 4)
    depth = torch.tensor([[9.0, 10.0]])
    img, shape = _scene(model, true, depth)
    start = true + torch.tensor([[[0.06, -0.05, 0.0, -0.02], [-0.05, 0.06, 0.0, 0.02]]])
    got = refine_poses(model, img, shape, start, depth, RefineConfig(steps=80, lr=5e-3))
    before = (start - true)[..., [0, 1, 3]].abs().max()
    after = (got - true)[..., [0, 1, 3]].abs().max()
    assert after < 0.25 * before, (before, after)  # translation and scale, not the disc's angle


def test_zero_steps_is_the_encoders_pose_and_parse_refined_matches_parse():
    torch.manual_seed(0)
    model = FlowCapsules(SMALL).eval()
    img = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    plain, same = model.parse(img), parse_refined(model, img, RefineConfig(steps=0))
    assert torch.equal(plain.pose, same.pose) and torch.allclose(plain.masks, same.masks)
    moved = parse_refined(model, img, RefineConfig(steps=3))
    assert moved.masks.shape == plain.masks.shape and not torch.equal(moved.pose, plain.pose)
    assert float(moved.pose[..., 3].min()) >= SMALL.scale_min
    assert all(not p.requires_grad or p.grad is None for p in model.parameters())


def test_edge_band_covers_pixels_near_a_step_only():
    img = torch.zeros(1, 3, 8, 8)
    img[..., 4:] = 1.0  # a vertical edge between columns 3 and 4
    band = edge_band(img, 1).view(8, 8)
    assert band[:, 3:5].all() and not band[:, :3].any() and not band[:, 5:].any()
    assert not edge_band(torch.full((1, 3, 8, 8), 0.5), 2).any()


def test_bad_refine_config_is_refused():
    with pytest.raises(FlowcapsError, match="refine needs"):
        RefineConfig(steps=-1).validate()
    with pytest.raises(FlowcapsError, match="refine needs"):
        dataclasses.replace(RefineConfig(), lr=0.0).validate()
