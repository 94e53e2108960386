"""PSD's modules: shapes, the batched cross-convolution against a per-sample loop, the
independence of the latent dimensions, masks and the structural descriptor on hand cases."""
import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from baselines.psd import PsdError
from baselines.psd.config import PROFILES, ModelConfig
from baselines.psd.model import (PSD, ImageDecoder, ImageEncoder, KernelDecoder, MotionDecoder,
                                 MotionEncoder, StructuralDescriptor, cross_conv, motion_masks)

B, D, SIZE = 3, 6, 32


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_module_shapes():
    torch.manual_seed(0)
    img = torch.rand(B, 3, SIZE, SIZE)
    flow = torch.randn(B, 2, SIZE, SIZE)
    feats = ImageEncoder(D)(img)
    assert feats.shape == (B, D, SIZE // 4, SIZE // 4)
    mean, log_var = MotionEncoder(7, D)(flow)
    assert mean.shape == log_var.shape == (B, D)
    kernels = KernelDecoder(D, 5, (8, 16, 8))(torch.randn(B, D))
    assert kernels.shape == (B, D, 5, 5)
    assert cross_conv(feats, kernels).shape == feats.shape
    local = MotionDecoder(D, (5, 3))(torch.randn(B, D, SIZE // 2, SIZE // 2), SIZE)
    assert local.shape == (B, 2, D, SIZE, SIZE)
    assert ImageDecoder(SIZE, 4)(img, flow).shape == img.shape
    masks = motion_masks(local, 1e-12, 1e-4)
    assert masks.shape == (B, D, SIZE, SIZE)


def test_feature_stride_2_skips_the_second_stride_and_keeps_the_weights():
    torch.manual_seed(0)
    img = torch.rand(B, 3, SIZE, SIZE)
    psd, half = ImageEncoder(D), ImageEncoder(D, feature_stride=2)
    assert half(img).shape == (B, D, SIZE // 2, SIZE // 2)
    def strides(enc):
        return [m.stride[0] for m in enc.modules() if isinstance(m, torch.nn.Conv2d)]
    assert strides(psd) == [2, 1, 2, 1, 1, 1] and strides(half) == [2, 1, 1, 1, 1, 1]
    half.load_state_dict(psd.state_dict())  # same shapes: a run can switch grids
    with pytest.raises(PsdError, match="feature_stride"):
        ModelConfig(feature_stride=8).validate()
    with pytest.raises(PsdError, match="feature_stride"):
        ModelConfig(feature_stride=2, motion_scale=4).validate()


def test_stage2_feature_stride_switches_the_grid_with_the_stage():
    torch.manual_seed(0)
    cfg = ModelConfig(image_size=SIZE, latent_dim=D, kernel_hidden=(8,), unet_width=4,
                      motion_scale=2, motion_kernels=(5, 3), stage2_feature_stride=2)
    model = PSD(cfg).eval()
    img, z = torch.rand(B, 3, SIZE, SIZE), torch.randn(B, D)
    assert model.feature_stride == 4 and model.local_motions(img, z).shape == (B, 2, D, SIZE, SIZE)
    assert model.image_encoder(img).shape == (B, D, SIZE // 4, SIZE // 4)
    model.set_active([1, 3])
    assert model.feature_stride == 2 and model.local_motions(img, z).shape == (B, 2, D, SIZE, SIZE)
    assert model.image_encoder(img).shape == (B, D, SIZE // 2, SIZE // 2)
    with pytest.raises(PsdError, match="stage2_feature_stride"):
        dataclasses.replace(cfg, stage2_feature_stride=3).validate()


@pytest.mark.parametrize("scale, stride", [(1, 4), (2, 4), (2, 2)])
def test_psd_forward_shapes_in_both_stages(scale, stride):
    torch.manual_seed(0)
    cfg = ModelConfig(image_size=SIZE, latent_dim=D, kernel_hidden=(8,), unet_width=4,
                      motion_scale=scale, motion_kernels=(5, 3), feature_stride=stride)
    model = PSD(cfg)
    img, flow = torch.rand(B, 3, SIZE, SIZE), torch.randn(B, 2, SIZE, SIZE)
    for active in (None, [0, 2, 3]):
        if active:
            model.set_active(active)
        out = model(img, flow, _gen())
        assert out.mean.shape == out.log_var.shape == (B, D)
        assert out.local.shape == (B, 2, D, SIZE, SIZE)
        assert out.flow.shape == (B, 2, SIZE, SIZE) and out.image.shape == img.shape
    assert model.active_dims() == [0, 2, 3] and model.stage2


@torch.no_grad()
def test_stage2_flow_active_leaves_the_inactive_dimensions_motion_out():
    """stage2_flow "all" (PSD) sums every dimension's motion into stage 2's flow; "active" only
    the active dimensions' (after the structure); stage 1 sums all in either."""
    torch.manual_seed(0)
    cfg = ModelConfig(image_size=SIZE, latent_dim=D, kernel_hidden=(8,), unet_width=4,
                      motion_scale=2, motion_kernels=(5, 3))
    img, flow = torch.rand(B, 3, SIZE, SIZE), torch.randn(B, 2, SIZE, SIZE)
    every, active = PSD(cfg).eval(), PSD(dataclasses.replace(cfg, stage2_flow="active")).eval()
    active.load_state_dict(every.state_dict())
    out_all, out_act = every(img, flow), active(img, flow)  # stage 1: the same sum
    assert torch.allclose(out_all.flow, out_act.flow)
    for model in (every, active):
        model.set_active([1, 3])
    out_all, out_act = every(img, flow), active(img, flow)
    assert torch.allclose(out_all.local, out_act.local)
    rest = out_all.local[:, :, [0, 2, 4, 5]].sum(2)  # (B, 2, H, W) the inactive dims' motion
    assert float(rest.abs().max()) > 1e-4  # so the two flows must differ by it
    assert torch.allclose(out_all.flow - out_act.flow, rest, atol=1e-5)
    with pytest.raises(PsdError, match="stage2_flow"):
        dataclasses.replace(cfg, stage2_flow="some").validate()


def test_cross_conv_matches_a_per_sample_per_dimension_loop():
    g = _gen(1)
    feats = torch.randn(4, 5, 9, 11, generator=g)
    kernels = torch.randn(4, 5, 3, 3, generator=g)
    ref = torch.empty_like(feats)
    for b in range(4):
        for d in range(5):
            ref[b, d] = F.conv2d(feats[b, d][None, None], kernels[b, d][None, None], padding=1)[0, 0]
    assert torch.allclose(cross_conv(feats, kernels), ref, atol=1e-5)


def test_each_kernel_depends_on_its_own_latent_only():
    torch.manual_seed(0)
    dec = KernelDecoder(D, 5, (8, 16)).eval()  # eval: batch norm uses its running statistics
    z = torch.randn(2, D)
    z2 = z.clone()
    z2[:, 4] += 1.0
    k, k2 = dec(z), dec(z2)
    changed = (k - k2).abs().flatten(2).amax(-1)  # (2, D)
    assert (changed[:, 4] > 1e-4).all()
    assert torch.equal(torch.cat([k[:, :4], k[:, 5:]], 1), torch.cat([k2[:, :4], k2[:, 5:]], 1))


def test_each_motion_map_depends_on_its_own_channel_only():
    torch.manual_seed(0)
    dec = MotionDecoder(D, (5, 3)).eval()
    x = torch.randn(2, D, 16, 16)
    x2 = x.clone()
    x2[:, 1] += 1.0
    diff = (dec(x, 32) - dec(x2, 32)).abs().amax((0, 1, 3, 4))  # (D,)
    assert diff[1] > 1e-4 and diff[torch.arange(D) != 1].max() == 0


def test_masks_are_motion_magnitude_over_its_maximum():
    local = torch.zeros(1, 2, 2, 2, 2)
    local[0, :, 0, 0, 0] = torch.tensor([3.0, 4.0])  # |m| = 5
    local[0, :, 0, 1, 1] = torch.tensor([0.0, 2.5])  # 2.5
    masks = motion_masks(local, 0.0, 0.0)
    assert torch.allclose(masks[0, 0], torch.tensor([[1.0, 0.0], [0.0, 0.5]]))
    assert torch.isnan(masks[0, 1]).all()  # no motion at all, no eps: 0 / 0
    assert torch.isfinite(motion_masks(local, 1e-12, 1e-4)).all()


def test_structure_spreads_the_parents_motion_over_its_child():
    """Parent 0 moves (2, 2) on pixel (0, 0); child 1 moves (0, 1) on pixel (1, 1); with
    S[0, 1] = 1 the parent's global motion covers both pixels; nothing else changes."""
    sd = StructuralDescriptor(3, -30.0)
    with torch.no_grad():
        sd.logits[0, 1] = 30.0  # sigmoid = 1 within float precision
        sd.logits[1, 1] = 30.0  # a diagonal entry: never allowed
    local = torch.zeros(1, 2, 3, 2, 2)
    local[0, :, 0, 0, 0] = torch.tensor([2.0, 2.0])
    local[0, :, 1, 1, 1] = torch.tensor([0.0, 1.0])
    active = torch.tensor([True, True, False])
    out = sd(local, motion_masks(local[:, :, active], 0.0, 1e-9), active)
    want = local.clone()
    want[0, :, 0, 1, 1] = torch.tensor([2.0, 2.0])
    assert torch.allclose(out, want, atol=1e-6)
    assert torch.allclose(out.sum(2)[0, :, 1, 1], torch.tensor([2.0, 3.0]), atol=1e-6)
    w = sd.weights(active).detach()
    assert w[0, 1] == pytest.approx(1.0) and w[1, 1] == 0 and w[2].sum() == 0


def test_motion_encoder_depth():
    assert ModelConfig(image_size=64).encoder_layers == 7  # PSD's 7 at either side
    assert ModelConfig(image_size=64, motion_encoder_layers=None).encoder_layers == 6
    with pytest.raises(PsdError, match="reach 1x1"):
        ModelConfig(image_size=128, motion_encoder_layers=6).validate()
    for side in (64, 128):
        assert MotionEncoder(7, 32)(torch.randn(2, 2, side, side))[0].shape == (2, 32)


def _convs(module):
    return [m for m in module.modules() if isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d))]


@pytest.mark.parametrize("side", [64, 128])
def test_the_faithful_model_has_psds_kernels_and_widths(side):
    """PSD's model.py: image encoder 3-32-32-64-64-32-32 (5x5), motion encoder 2-16-16-32-32-
    64-64-64 (5x5, stride 2), kernel MLPs 1-64-128-64-25, motion decoder 9-9-5-5 depthwise over
    2 x 32 channels at full size, UNet ngf 64 down to 1x1, batch-norm gains normal(1, 1)."""
    torch.manual_seed(0)
    cfg = ModelConfig(image_size=side)
    assert dataclasses.replace(PROFILES["gpu"].model, image_size=side) == cfg  # gpu: faithful
    model = PSD(cfg)
    enc = _convs(model.image_encoder)
    assert [c.out_channels for c in enc] == [32, 32, 64, 64, 32, 32]
    assert {c.kernel_size for c in enc} == {(5, 5)} and [c.stride[0] for c in enc][:3] == [2, 1, 2]
    mot = _convs(model.motion_encoder)
    assert [c.out_channels for c in mot] == [16, 16, 32, 32, 64, 64, 64]
    assert {c.kernel_size for c in mot} == {(5, 5)} and {c.stride for c in mot} == {(2, 2)}
    ker = _convs(model.kernel_decoder)  # grouped: channels are 32 x the MLP's widths
    assert [c.out_channels // 32 for c in ker] == [64, 128, 64, 25]
    dec = _convs(model.motion_decoder)
    assert [c.kernel_size[0] for c in dec] == [9, 9, 5, 5]
    assert all(c.groups == c.out_channels == 64 for c in dec[1:]) and dec[0].groups == 32
    assert cfg.motion_scale == 1 and not cfg.odd_motion
    downs = [m for m in model.image_decoder.downs.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(downs) == int(math.log2(side)) and downs[0].out_channels == 64
    assert all(c.bias is None for c in downs)
    gains = torch.cat([m.weight.detach() for m in model.modules()
                       if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d))])
    assert 0.9 < float(gains.std()) < 1.1 and 0.9 < float(gains.mean()) < 1.1


def test_the_faithful_model_runs_at_128_px():
    torch.manual_seed(0)
    model = PSD(ModelConfig(image_size=128, latent_dim=4)).eval()
    out = model(torch.rand(1, 3, 128, 128), torch.randn(1, 2, 128, 128))
    assert out.local.shape == (1, 2, 4, 128, 128) and out.image.shape == (1, 3, 128, 128)


def test_the_odd_motion_decoder_is_odd_and_still_at_zero():
    torch.manual_seed(0)
    dec = MotionDecoder(D, (5, 3), odd=True)
    x = torch.randn(2, D, 16, 16)
    assert torch.allclose(dec(-x, 32), -dec(x, 32), atol=1e-6)
    assert dec(torch.zeros(2, D, 16, 16), 32).abs().max() == 0
