"""The optional loss terms (appearance, occlusion weighting, colour shuffle, blur fade) and the "segment" head."""
import pytest
import torch

from flowcaps.config import ModelConfig
from flowcaps import geometry
from flowcaps.config import OVERLAP_RAMP, TrainConfig
from flowcaps.errors import FlowcapsError
from flowcaps.losses import (appearance_loss, consistency_loss, occlusion_keep, overlap_loss,
                             pair_loss, shuffle_channels)
from flowcaps.model import FlowCapsules
from flowcaps.trainer import _ramp

H = W = 16


def _two_regions() -> tuple[torch.Tensor, torch.Tensor]:
    """A red left half and a grey right half as P = H*W points: target (1, 3, P), inside (P,)."""
    xs = torch.arange(H * W) % W
    inside = xs < W // 2  # (P,)
    target = torch.empty(1, 3, H * W)
    target[0, :, inside] = torch.tensor([0.9, 0.1, 0.1])[:, None]
    target[0, :, ~inside] = 0.7
    return target, inside


def test_appearance_is_zero_on_the_true_layers_and_grows_with_misfit():
    target, inside = _two_regions()
    weight = torch.ones(1, H * W)
    exact = inside.float()[None, None]  # (1, 1, P): one capsule owns the red half
    assert float(appearance_loss(exact, target, weight)) < 1e-10
    shifted = torch.roll(inside, 3).float()[None, None]  # the layer slid off by 3 px
    half = 0.5 * exact  # a soft, hedging claim
    assert float(appearance_loss(shifted, target, weight)) > 1e-3
    assert float(appearance_loss(half, target, weight)) > 1e-3


def _disc_model() -> FlowCapsules:
    """K=1 whose mask is the fixed disc prior of radius `scale` (the learned part zeroed)."""
    model = FlowCapsules(ModelConfig(image_size=H, num_capsules=1, capsule_dim=8,
                                     enc_channels=(4,), mask_prior=40.0))
    with torch.no_grad():
        model.decoder.out.weight.zero_()
    return model


def test_occlusion_keep_drops_points_covered_at_their_destination():
    """A disc at the origin in dst: a background point landing on it has no match; others do."""
    model = _disc_model()
    shape = torch.zeros(1, 1, 3)
    caps_next = (shape, torch.tensor([[[0.0, 0.0, 0.0, 0.3]]]), torch.full((1, 1), 10.0))
    dest = torch.tensor([[[0.0, 0.0], [0.9, 0.9], [0.0, 0.0]]])  # (1, P=3, 2)
    # src visibility: points 0 and 1 are background, point 2 belongs to the capsule
    vis = torch.tensor([[[0.0, 0.0, 1.0]]])  # (1, K=1, P=3)
    keep = occlusion_keep(model, vis, caps_next, dest)[0]
    assert float(keep[0]) < 0.01  # background covered by the capsule in dst
    assert float(keep[1]) > 0.99  # background still background
    assert float(keep[2]) > 0.99  # the capsule's own pixel lands on the capsule


def test_segment_head_centres_follow_the_claimed_cells():
    torch.manual_seed(0)
    model = FlowCapsules(ModelConfig(image_size=32, num_capsules=4, translation_head="segment"))
    enc = model.encoder
    k, cells = 4, enc.cells.shape[0]
    logits = torch.full((1, k, cells), -30.0)
    corner = (enc.cells[:, 0] > 0.5) & (enc.cells[:, 1] > 0.5)  # bottom-right cells
    logits[0, 2, corner] = 30.0  # capsule 2 claims them outright
    t, own = enc._segment_centres(logits)  # (1, K, 2), (1, K, cells)
    assert float(own[0, 2, corner].min().detach()) > 0.99
    target = enc.cells[corner].mean(0)
    anchor = torch.softmax(enc.heat_prior, -1) @ enc.cells  # (K, 2)
    # the claimed cells' centroid, pulled only slightly towards the capsule's prior position
    assert (t[0, 2] - target).norm() < 0.15 * (anchor[2] - target).norm()
    # a capsule that claims nothing sits at its prior position, inside the frame
    assert torch.allclose(t[0, 0], anchor[0], atol=1e-4)
    caps = model.parse(torch.rand(2, 3, 32, 32))
    assert caps.pose[..., :2].abs().max() <= 1.0


def test_capsule_codes_are_shared_by_every_image():
    torch.manual_seed(0)
    model = FlowCapsules(ModelConfig(image_size=32, num_capsules=3, shape_code="capsule",
                                     depth_code="capsule"))
    shape, pose, depth = model.encode(torch.rand(2, 3, 32, 32))
    assert torch.equal(shape[0], shape[1]) and torch.equal(depth[0], depth[1])
    assert not torch.equal(pose[0], pose[1])  # poses still follow the image
    assert len(set(depth[0].tolist())) == 3  # a defined front-to-back order from the start


def test_prior_gain_is_stored_and_old_checkpoints_load():
    model = FlowCapsules(ModelConfig(image_size=32, num_capsules=2))
    state = model.state_dict()
    assert "encoder.prior_gain" in state
    model.encoder.prior_gain.fill_(0.0)
    old = {k: v for k, v in state.items() if k != "encoder.prior_gain"}
    model.load_weights(old)  # a checkpoint from before the gain existed: full prior
    assert float(model.encoder.prior_gain) == 1.0


def test_colour_shuffle_permutes_each_image_on_its_own_and_repeats_with_the_seed():
    images = torch.rand(64, 3, 4, 4, generator=torch.Generator().manual_seed(1))
    out = shuffle_channels(images, torch.Generator().manual_seed(7))
    orders = []
    for x, y in zip(images, out):
        # every output channel is one input channel, each used once
        src = [int(((x - y[c]) ** 2).sum((1, 2)).argmin()) for c in range(3)]
        assert sorted(src) == [0, 1, 2] and all(torch.equal(y[c], x[s]) for c, s in enumerate(src))
        orders.append(tuple(src))
    assert len(set(orders)) == 6  # all six orders occur among 64 images: independent draws
    again = shuffle_channels(images, torch.Generator().manual_seed(7))
    assert torch.equal(out, again)


def test_colour_shuffle_changes_only_what_the_encoder_sees():
    torch.manual_seed(0)
    model = FlowCapsules(ModelConfig(image_size=H, enc_channels=(8, 8)))
    img0, img1 = torch.rand(2, 4, 3, H, W, generator=torch.Generator().manual_seed(3))
    cfg = TrainConfig(model=model.config, points=0, w_appearance=1.0)
    plain = pair_loss(model, img0, img1, cfg, torch.Generator().manual_seed(0))
    grey0, grey1 = img0.mean(1, keepdim=True).expand(-1, 3, -1, -1), img1.mean(1, keepdim=True).expand(-1, 3, -1, -1)
    shuffled = cfg.replace(colour_shuffle=True)
    # grey frames look the same in any channel order: the loss cannot change
    a = pair_loss(model, grey0, grey1, cfg, torch.Generator().manual_seed(0))
    b = pair_loss(model, grey0, grey1, shuffled, torch.Generator().manual_seed(0))
    assert torch.allclose(a.total, b.total)
    # colour frames: the encoder's view changes, so the loss does
    c = pair_loss(model, img0, img1, shuffled, torch.Generator().manual_seed(0))
    assert not torch.allclose(plain.total, c.total)


def test_blur_gain_weighs_the_blurred_levels_of_the_render_loss():
    torch.manual_seed(0)
    model = FlowCapsules(ModelConfig(image_size=H, enc_channels=(8, 8)))
    img0, img1 = torch.rand(2, 4, 3, H, W, generator=torch.Generator().manual_seed(3))
    pyramid = TrainConfig(model=model.config, points=0, smooth_points=0, w_center=0.0,
                          blur_sigmas=(0.0, 2.0), both_directions=False)
    sharp = pyramid.replace(blur_sigmas=(0.0,))
    def render(cfg, gain=1.0):
        return pair_loss(model, img0, img1, cfg, torch.Generator().manual_seed(0), blur_gain=gain).render
    both, only_sharp = render(pyramid), render(sharp)
    assert not torch.allclose(both, only_sharp)  # the blurred level counts at gain 1
    assert torch.allclose(render(pyramid, torch.tensor(0.0)), only_sharp)  # and not at gain 0
    half = render(pyramid, torch.tensor(0.5))  # a weighted mean: between the two
    blurred_only = 2 * both - only_sharp  # both = (sharp + blurred) / 2
    assert torch.allclose(half, (only_sharp + 0.5 * blurred_only) / 1.5, atol=1e-6)


def test_blur_fade_needs_a_sharp_level():
    with pytest.raises(FlowcapsError, match="blur_fade"):
        TrainConfig(blur_sigmas=(1.5, 3.0), blur_fade=0.5).validate()
    TrainConfig(blur_fade=0.5).validate()


def test_overlap_penalises_capsules_that_cover_the_same_pixels_and_move_alike():
    u = torch.rand(1, 50, 2, generator=torch.Generator().manual_seed(1)) * 2 - 1  # (1, P, 2)
    pose = torch.tensor([[[0.0, 0.0, 0.0, 0.3], [0.0, 0.0, 0.0, 0.3]]])  # (1, K=2, 4)
    v = geometry.to_canonical(pose, u)  # (1, 2, P, 2)
    weight = torch.ones(1, 50)
    full = torch.ones(1, 2, 50)
    together = pose + torch.tensor([0.1, 0.0, 0.0, 0.0])  # both move 0.1 frame units = 1.6 px at 32 px
    apart = pose + torch.tensor([[[0.2, 0.0, 0.0, 0.0], [-0.2, 0.0, 0.0, 0.0]]])
    dup = overlap_loss(full, v, together, u, weight, 1.0, (32, 32))
    assert abs(float(dup) - 2.0) < 1e-5  # two ordered pairs, both masks 1 everywhere, gate 1
    assert float(overlap_loss(full, v, apart, u, weight, 1.0, (32, 32))) < 1e-6  # 6.4 px apart
    disjoint = torch.stack([(u[..., 0] > 0).float(), (u[..., 0] <= 0).float()], 1)  # (1, 2, P)
    assert float(overlap_loss(disjoint, v, together, u, weight, 1.0, (32, 32))) == 0.0
    # the gradient shrinks both masks where they overlap
    masks = torch.full((1, 2, 50), 0.8, requires_grad=True)
    overlap_loss(masks, v, together, u, weight, 1.0, (32, 32)).backward()
    assert bool((masks.grad > 0).all())


def test_overlap_gain_scales_the_term_and_its_ramp_starts_late():
    torch.manual_seed(0)
    model = FlowCapsules(ModelConfig(image_size=H, enc_channels=(8, 8)))
    img0 = torch.rand(4, 3, H, W, generator=torch.Generator().manual_seed(3))
    img1 = img0  # no motion: every pair of capsules moves alike, so overlaps count in full
    cfg = TrainConfig(model=model.config, points=0, smooth_points=0, w_overlap=0.5)
    def total(gain):
        return pair_loss(model, img0, img1, cfg, torch.Generator().manual_seed(0),
                         overlap_gain=torch.tensor(gain)).total
    full = pair_loss(model, img0, img1, cfg, torch.Generator().manual_seed(0))
    assert float(full.overlap.detach()) > 0
    assert torch.allclose(total(0.0), full.total - 0.5 * full.overlap, atol=1e-6)
    assert torch.allclose(total(1.0), full.total)
    # the trainer's ramp: off until overlap_start, full OVERLAP_RAMP later
    assert [_ramp(f, 0.4, OVERLAP_RAMP) for f in (0.0, 0.4, 0.45, 0.5, 0.9)] == pytest.approx(
        [0.0, 0.0, 0.5, 1.0, 1.0])
    with pytest.raises(FlowcapsError, match="overlap_start"):
        cfg.replace(overlap_start=1.0).validate()


def test_consistency_is_zero_for_one_shape_code_per_capsule_and_grows_with_its_spread():
    torch.manual_seed(0)
    model = FlowCapsules(ModelConfig(image_size=H, enc_channels=(8, 8), dec_hidden=16))
    per_capsule = torch.randn(1, 8, model.config.shape_dim)  # (1, K, |s|)
    same = per_capsule.expand(5, -1, -1)  # every image: the same code per capsule
    assert float(consistency_loss(model, same).detach()) < 1e-9
    varied = same + torch.randn(5, 8, model.config.shape_dim)
    more = same + 3 * torch.randn(5, 8, model.config.shape_dim)
    a, b = float(consistency_loss(model, varied).detach()), float(consistency_loss(model, more).detach())
    assert 0 < a < b
    cfg = TrainConfig(model=model.config, points=0, w_consistency=1.0)
    img0, img1 = torch.rand(2, 4, 3, H, W, generator=torch.Generator().manual_seed(3))
    terms = pair_loss(model, img0, img1, cfg, torch.Generator().manual_seed(0))
    off = pair_loss(model, img0, img1, cfg.replace(w_consistency=0.0), torch.Generator().manual_seed(0))
    assert float(terms.consistency.detach()) > 0 and float(off.consistency) == 0.0
    assert torch.allclose(terms.total, off.total + terms.consistency)
