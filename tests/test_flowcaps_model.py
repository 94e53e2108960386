"""The model's public API, its switches, the split first decoder layer and the configs."""
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from flowcaps import FlowcapsError, FlowCapsules, PROFILES, TrainConfig
from tiny_flowcaps import model_config

SMALL = model_config(image_size=32, num_capsules=4, capsule_dim=10, enc_channels=(4, 8),
                     enc_hidden=16, dec_hidden=8, dec_depth=2)


def _images(b=2, seed=0):
    return torch.rand(b, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


def test_parse_shapes_ranges_and_flow_shape():
    torch.manual_seed(0)
    model = FlowCapsules(SMALL).eval()
    caps = model.parse(_images())
    assert caps.shape.shape == (2, 4, 5) and caps.pose.shape == (2, 4, 4)
    assert caps.depth.shape == (2, 4)
    assert caps.masks.shape == caps.visible.shape == (2, 4, 32, 32)
    assert float(caps.masks.min()) >= 0 and float(caps.masks.max()) <= 1
    total = caps.visible.sum(1)  # (B, H, W): the static background takes the rest
    assert float(total.max()) <= 1 + 1e-5 and float(total.min()) >= 0
    assert float(caps.pose[..., 3].min()) > 0, "scale must stay positive"
    assert model.flow(_images(seed=1), _images(seed=2)).shape == (2, 2, 32, 32)
    # the same image twice: every capsule keeps its pose, so the flow is zero
    assert float(model.flow(_images(), _images()).abs().max()) < 1e-5


def test_the_split_first_layer_equals_concatenation():
    """W [s; v] = W_s s + W_v v: the decoder equals an MLP on the concatenated input."""
    torch.manual_seed(0)
    dec = FlowCapsules(dataclasses.replace(SMALL, mask_prior=0.0)).decoder
    s = torch.randn(2, 4, 5)
    v = torch.randn(2, 4, 7, 2)
    w = torch.cat([dec.in_s.weight, dec.in_v.weight], 1)  # (Hd, |s| + 2)
    x = torch.cat([s[:, :, None].expand(-1, -1, 7, -1), v], -1)  # (B, K, P, |s| + 2)
    h = F.selu(x @ w.T + dec.in_s.bias)
    for layer in dec.hidden:
        h = layer(h)
    assert torch.allclose(dec(s, v), dec.out(h)[..., 0], atol=1e-5)


def _two_capsules(model, depth):
    shape = torch.zeros(1, 2, model.config.shape_dim)
    pose = torch.tensor([[[0.0, 0.0, 0.0, 0.5], [0.0, 0.0, 0.0, 0.5]]])  # identical, overlapping
    u = torch.zeros(1, 1, 2)  # the shared centre
    with torch.no_grad():
        return model.masks_at(shape, pose, torch.tensor([depth]), u)


def test_depth_ordering_switch():
    cfg = dataclasses.replace(SMALL, num_capsules=2, mask_prior=8.0)
    on = FlowCapsules(cfg)
    with torch.no_grad():
        on.decoder.out.weight.zero_()
    near = _two_capsules(on, [1.0, 12.0]).visible[0, :, 0]
    assert float(near[1]) > 0.99, "the nearer capsule owns the shared pixel"
    off = FlowCapsules(dataclasses.replace(cfg, depth_ordering=False))
    off.load_state_dict(on.state_dict())
    flat = _two_capsules(off, [1.0, 12.0]).visible[0, :, 0]
    assert abs(float(flat[0] - flat[1])) < 1e-5, "without depth the two capsules tie"


def test_over_layering_keeps_a_capsule_edge_at_one_half_whatever_lies_behind():
    from flowcaps.model import composite_over
    lam = torch.tensor([[[0.5, 0.9, 0.2], [1.0, 1.0, 1.0]]])  # (B=1, K=2, P=3)
    depth = torch.tensor([[30.0, 10.0]])  # capsule 0 well in front
    vis = composite_over(lam, depth)
    assert torch.allclose(vis[0, 0], lam[0, 0], atol=1e-6), "the front capsule shows its own mask"
    assert torch.allclose(vis[0, 1], 1 - lam[0, 0], atol=1e-6), "the one behind shows through"
    # with the softmax layering the same front capsule wins its edge point (Lambda 1/2) only by
    # half, against a background capsule with Lambda 1 behind it
    cfg = dataclasses.replace(SMALL, num_capsules=3)
    torch.manual_seed(0)
    three = torch.rand(2, 3, 50)  # (B, K, P)
    d = torch.tensor([[9.0, 9.0, 9.0], [8.0, 20.0, 14.0]])  # tied, then ordered
    v3 = composite_over(three, d)
    assert float(v3.sum(1).max()) <= 1 + 1e-6 and float(v3.min()) >= 0
    assert torch.allclose(v3[1, 1], three[1, 1], atol=3e-3)  # the nearest (6 depth units ahead)
    # through the model: "over" uses it, and the depth gets a gradient
    model = FlowCapsules(dataclasses.replace(cfg, layering="over"))
    depth = torch.tensor([[9.0, 10.0, 11.0]], requires_grad=True)
    pm = model.masks_at(torch.zeros(1, 3, cfg.shape_dim), torch.tensor([[[0.0, 0, 0, 0.5]] * 3]),
                        depth, torch.rand(1, 20, 2) * 2 - 1)
    assert torch.allclose(pm.visible, composite_over(pm.masks, depth), atol=1e-6)
    pm.visible[0, 0].sum().backward()
    assert float(depth.grad.abs().sum()) > 0
    with pytest.raises(FlowcapsError, match="layering"):
        dataclasses.replace(SMALL, layering="under").validate()
    with pytest.raises(FlowcapsError, match="static"):
        dataclasses.replace(SMALL, layering="over", background="uniform").validate()


def test_background_modes():
    """uniform: weights always sum to 1; static: far from every capsule the background owns u."""
    for mode, far_total in (("uniform", 1.0), ("static", 0.0)):
        model = FlowCapsules(dataclasses.replace(SMALL, num_capsules=2, mask_prior=8.0,
                                                 background=mode))
        with torch.no_grad():
            model.decoder.out.weight.zero_()
            shape = torch.zeros(1, 2, model.config.shape_dim)
            pose = torch.tensor([[[-0.5, 0.0, 0.0, 0.2], [0.5, 0.0, 0.0, 0.2]]])
            u = torch.tensor([[[-0.5, 0.0], [0.0, 0.9]]])  # on capsule 0; far from both
            vis = model.masks_at(shape, pose, torch.tensor([[12.0, 12.0]]), u).visible[0]  # (K, P)
        assert float(vis[0, 0]) > 0.8
        assert abs(float(vis[:, 1].sum()) - far_total) < 1e-2


@pytest.mark.parametrize("changes", [dict(num_capsules=16), dict(capsule_dim=8), dict(dec_depth=6),
                                     dict(coord_channels=False, mask_prior=0.0)])
def test_ablation_switches_build_and_run(changes):
    model = FlowCapsules(dataclasses.replace(SMALL, **changes))
    caps = model.parse(_images(1))
    assert caps.shape.shape[-1] == model.config.capsule_dim - 5
    assert caps.masks.shape[1] == model.config.num_capsules
    n_hidden = sum(isinstance(m, torch.nn.Linear) for m in model.decoder.hidden)
    assert n_hidden == model.config.dec_depth - 1


def test_encoder_group_norm_is_used_and_off_by_default():
    plain = FlowCapsules(SMALL)
    assert not any("norms" in k for k in plain.state_dict())  # checkpoints without it still load
    torch.manual_seed(0)
    model = FlowCapsules(dataclasses.replace(SMALL, enc_norm=2))
    seen = []
    assert isinstance(model.encoder.norms[0], torch.nn.Identity)  # not at full resolution
    model.encoder.norms[1].register_forward_hook(lambda m, i, o: seen.append(o.detach()))
    model.parse(_images(3))
    (out,) = seen  # the second block's conv output, normalised before its ReLU
    groups = out.view(3, 2, -1)  # (B, groups, channels per group * H * W)
    assert torch.allclose(groups.mean(-1), torch.zeros(3, 2), atol=1e-4)
    assert torch.allclose(groups.var(-1, unbiased=False), torch.ones(3, 2), atol=1e-2)
    with pytest.raises(FlowcapsError, match="enc_norm"):
        FlowCapsules(dataclasses.replace(SMALL, enc_norm=3))  # 3 does not divide 8 channels
    FlowCapsules(dataclasses.replace(SMALL, enc_norm=8))  # the first conv's 4 channels are free


def test_config_json_round_trip_and_errors():
    cfg = PROFILES["quick"](out="somewhere").replace(blur_sigmas=[0.0, 2.0], model={"num_capsules": 5})
    assert cfg.blur_sigmas == (0.0, 2.0) and cfg.model.num_capsules == 5
    back = TrainConfig.from_json(cfg.to_json())
    assert back == cfg
    with pytest.raises(FlowcapsError, match="unknown"):
        TrainConfig.from_dict({"nope": 1})
    with pytest.raises(FlowcapsError, match="unknown"):
        cfg.replace(model={"nope": 1})
    with pytest.raises(FlowcapsError, match="translation_head"):
        FlowCapsules(dataclasses.replace(SMALL, translation_head="segment"))
    with pytest.raises(FlowcapsError, match="multiple"):
        FlowCapsules(dataclasses.replace(SMALL, image_size=36, enc_channels=(4, 4, 4)))
    assert PROFILES["paper"]().lr == 1e-4 and PROFILES["paper"]().model.num_capsules == 8


def test_softargmax_head_starts_on_the_ring():
    """On a blank image the heat maps are flat but for their prior: t_k sits on the init ring."""
    torch.manual_seed(0)
    cfg = dataclasses.replace(SMALL, translation_head="softargmax", coord_channels=False)
    model = FlowCapsules(cfg)
    with torch.no_grad():
        model.encoder.heat.weight.zero_()
        _, pose, _ = model.encode(torch.full((1, 3, 32, 32), 0.5))
    k = torch.arange(cfg.num_capsules) * 2 * torch.pi / cfg.num_capsules
    ring = cfg.init_ring * torch.stack([k.cos(), k.sin()], -1)  # (K, 2)
    assert torch.allclose(pose[0, :, :2], ring, atol=0.05)


def test_center_loss_forms_by_hand():
    from flowcaps.losses import center_loss

    masks = torch.tensor([[[1.0, 1.0, 0.0]]])  # (B=1, K=1, P=3)
    v = torch.tensor([[[[1.0, 0.0], [1.0, 2.0], [5.0, 5.0]]]])  # (1, 1, 3, 2)
    scale = torch.tensor([[2.0]])
    # spread: (1 + 5 + 0) / 3; in image units times s^2 = 4
    assert abs(float(center_loss(masks, v, scale, "spread")) - 2.0) < 1e-5
    assert abs(float(center_loss(masks, v, scale, "spread_image")) - 8.0) < 1e-5
