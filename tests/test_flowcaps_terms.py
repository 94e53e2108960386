"""The loss terms beyond the paper's (appearance, slow), the blur pyramid, colour shuffle."""
import torch

from flowcaps.losses import appearance_loss, pair_loss, shuffle_channels, slow_loss
from flowcaps.model import FlowCapsules
from tiny_flowcaps import model_config, train_config

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


def test_still_background_explains_a_textured_static_background():
    """appearance_background "still": a capsule carving a textured background costs, it never pays."""
    target, inside = _two_regions()
    gen = torch.Generator().manual_seed(0)
    texture = torch.rand(1, 3, H * W, generator=gen)  # (1, 3, P): a photograph's stand-in
    target = torch.where(inside, target, texture)  # red shape on the left, texture on the right
    weight = torch.ones(1, H * W)
    shape = inside.float()[None, None]  # (1, 1, P)
    carve = torch.cat([shape, (~inside & (torch.arange(H * W) < H * W // 2)).float()[None, None]], 1)
    # the other frame equals this one where the background did not move
    assert float(appearance_loss(shape, target, weight, target)) < 1e-10
    assert float(appearance_loss(carve, target, weight, target)) > 1e-3
    # with a flat background colour instead, carving the texture lowers the loss
    assert float(appearance_loss(carve, target, weight)) < float(appearance_loss(shape, target, weight))


def test_capsule_codes_are_shared_by_every_image():
    torch.manual_seed(0)
    model = FlowCapsules(model_config(image_size=32, num_capsules=3, shape_code="capsule"))
    shape, pose, depth = model.encode(torch.rand(2, 3, 32, 32))
    assert torch.equal(shape[0], shape[1])
    assert not torch.equal(pose[0], pose[1]) and not torch.equal(depth[0], depth[1])


def test_prior_gain_is_stored_and_old_checkpoints_load():
    model = FlowCapsules(model_config(image_size=32, num_capsules=2))
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
    model = FlowCapsules(model_config(image_size=H, enc_channels=(8, 8)))
    img0, img1 = torch.rand(2, 4, 3, H, W, generator=torch.Generator().manual_seed(3))
    cfg = train_config(model=model.config, points=0, w_appearance=1.0)
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


def test_render_loss_is_the_mean_over_the_pyramid_levels():
    torch.manual_seed(0)
    model = FlowCapsules(model_config(image_size=H, enc_channels=(8, 8)))
    img0, img1 = torch.rand(2, 4, 3, H, W, generator=torch.Generator().manual_seed(3))
    base = train_config(model=model.config, points=0, smooth_points=0, w_center=0.0,
                        both_directions=False)
    def render(sigmas):
        cfg = base.replace(blur_sigmas=sigmas)
        return pair_loss(model, img0, img1, cfg, torch.Generator().manual_seed(0)).render
    sharp, blurred = render((0.0,)), render((2.0,))
    assert not torch.allclose(sharp, blurred)
    assert torch.allclose(render((0.0, 2.0)), (sharp + blurred) / 2, atol=1e-7)


def test_slow_is_the_mean_squared_flow_in_pixels():
    weight = torch.ones(2, 10)
    still = torch.zeros(2, 10, 2)  # (B, P, 2)
    assert float(slow_loss(still, weight, (32, 32))) == 0.0
    moving = torch.zeros(2, 10, 2)
    moving[..., 0] = 0.1  # 0.1 frame units = 1.6 px at 32 px
    assert abs(float(slow_loss(moving, weight, (32, 32))) - 1.6 ** 2) < 1e-5
    # importance weights count as in the other terms: half the points at weight 2, half at 0
    skewed = torch.cat([torch.full((2, 5), 2.0), torch.zeros(2, 5)], 1)
    moving[:, 5:, 0] = 1.0  # a fast half that carries no weight
    assert abs(float(slow_loss(moving, skewed, (32, 32))) - 1.6 ** 2) < 1e-5


def _moving_pair(**model_kw):
    """A tiny model and two random frames of 4 images (the capsules move between them)."""
    torch.manual_seed(0)
    model = FlowCapsules(model_config(image_size=H, enc_channels=(8, 8), **model_kw))
    img0, img1 = torch.rand(2, 4, 3, H, W, generator=torch.Generator().manual_seed(3))
    return model, img0, img1


def test_slow_enters_the_total_with_its_weight():
    model, img0, img1 = _moving_pair()
    cfg = train_config(model=model.config, points=0, smooth_points=0, w_slow=0.5)
    on = pair_loss(model, img0, img1, cfg, torch.Generator().manual_seed(0))
    off = pair_loss(model, img0, img1, cfg.replace(w_slow=0.0), torch.Generator().manual_seed(0))
    assert float(on.slow.detach()) > 0 and float(off.slow) == 0.0
    assert torch.allclose(on.total, off.total + 0.5 * on.slow, atol=1e-6)
