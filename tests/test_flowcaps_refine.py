"""Test-time pose refinement: off is the identity, it recovers a known pose, its band and its
draws of band pixels."""
import dataclasses

import pytest
import torch

from flowcaps import FlowcapsError, FlowCapsules, RefineConfig, parse_refined, refine_poses
from flowcaps import geometry
from flowcaps.refine import edge_band
from tiny_flowcaps import model_config

# Two capsules, the "over" layering; the decoder's disc prior makes each mask a soft disc.
SMALL = model_config(image_size=32, num_capsules=2, capsule_dim=10, enc_channels=(4, 8),
                     enc_hidden=16, dec_hidden=8, dec_depth=2, layering="over", mask_prior=12.0)
COLOURS = torch.tensor([[0.9, 0.1, 0.1], [0.1, 0.2, 0.9]])  # (K, 3)
TRUE = torch.tensor([[[-0.3, -0.2, 0.0, 0.3], [0.3, 0.25, 0.0, 0.25]]])  # (1, K, 4) poses drawn
DEPTH = torch.tensor([[9.0, 10.0]])  # (1, K)
# The refinement starts from poses shifted and scaled off the drawn ones.
START = TRUE + torch.tensor([[[0.06, -0.05, 0.0, -0.02], [-0.05, 0.06, 0.0, 0.02]]])


def _pose_error(pose):
    """Largest error of translation and scale (not the disc's angle, which the image cannot tell)."""
    return float((pose - TRUE)[..., [0, 1, 3]].abs().max())


def _scene(model, pose, depth):
    """The image the model's own layered masks draw at `pose` with flat colours on black."""
    shape = torch.zeros(pose.shape[0], 2, SMALL.shape_dim)  # (B, K, C-5)
    u = geometry.pixel_centres(32, 32).expand(pose.shape[0], -1, -1)  # (B, P, 2)
    with torch.no_grad():
        vis = model.masks_at(shape, pose, depth, u).visible  # (B, K, P)
    img = torch.einsum("bkp,kc->bcp", vis, COLOURS).view(-1, 3, 32, 32)  # (B, 3, H, W)
    return img, shape


def _photo_scene(model):
    """The scene's shapes over a random photograph: (image, shape codes, the photograph)."""
    shapes, shape = _scene(model, TRUE, DEPTH)
    u = geometry.pixel_centres(32, 32)[None]  # (1, P, 2)
    with torch.no_grad():
        covered = model.masks_at(shape, TRUE, DEPTH, u).visible.sum(1).view(1, 1, 32, 32)
    photo = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(2))  # (1, 3, H, W)
    return shapes + (1 - covered) * photo, shape, photo  # image (1, 3, H, W)


def test_refinement_recovers_a_shifted_and_scaled_pose():
    torch.manual_seed(0)
    model = FlowCapsules(SMALL).eval()
    img, shape = _scene(model, TRUE, DEPTH)
    got = refine_poses(model, img, shape, START, DEPTH, RefineConfig(steps=80, lr=5e-3))
    assert _pose_error(got) < 0.25 * _pose_error(START), (_pose_error(START), _pose_error(got))


def test_a_still_background_lets_refinement_fit_shapes_on_a_photograph():
    # A textured background that does not move: the pair's other frame shows it without the
    # shapes. A flat background colour cannot explain it; the other frame's pixels can.
    torch.manual_seed(0)
    model = FlowCapsules(SMALL).eval()
    img, shape, photo = _photo_scene(model)
    cfg = RefineConfig(steps=80, lr=5e-3)
    err = {name: _pose_error(refine_poses(model, img, shape, START, DEPTH, cfg, still))
           for name, still in (("flat", None), ("still", photo))}
    before = _pose_error(START)
    assert err["still"] < 0.25 * before and err["still"] < 0.5 * err["flat"], (before, err)
    with pytest.raises(FlowcapsError, match="do not match"):
        refine_poses(model, img, shape, START, DEPTH, cfg, photo[..., :16])
    refined = parse_refined(model, img, RefineConfig(steps=2), still=photo)
    assert refined.masks.shape == (1, 2, 32, 32)


def test_drawn_band_pixels_still_fit_the_pose_and_follow_the_seed():
    # The photograph makes every pixel band (1,024 at 32 px): 128 drawn afresh per step.
    torch.manual_seed(0)
    model = FlowCapsules(SMALL).eval()
    img, shape, photo = _photo_scene(model)
    cfg = RefineConfig(steps=80, lr=5e-3, points=128)
    drawn = refine_poses(model, img, shape, START, DEPTH, cfg, photo)
    assert _pose_error(drawn) < 0.25 * _pose_error(START), (_pose_error(START), _pose_error(drawn))
    assert torch.equal(drawn, refine_poses(model, img, shape, START, DEPTH, cfg, photo))
    other = dataclasses.replace(cfg, seed=1)
    assert not torch.equal(drawn, refine_poses(model, img, shape, START, DEPTH, other, photo))
    # A cap at or above the band draws nothing: every band pixel, as points=0.
    every = dataclasses.replace(cfg, points=0)
    assert torch.equal(refine_poses(model, img, shape, START, DEPTH, every, photo),
                       refine_poses(model, img, shape, START, DEPTH,
                                    dataclasses.replace(cfg, points=1024), photo))


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
    with pytest.raises(FlowcapsError, match="points >= 0"):
        RefineConfig(points=-1).validate()
