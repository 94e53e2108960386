"""PSD's loss terms on hand-worked cases."""
import math

import pytest
import torch

from baselines.psd.config import ModelConfig, TrainConfig
from baselines.psd.errors import PsdError
from baselines.psd.losses import flow_loss, kl_per_dim, local_l1, psd_loss, structure_l1
from baselines.psd.model import PSD
from trainloop import ramp


def test_kl_per_dimension_by_hand():
    mean = torch.tensor([[0.0, 1.0, 0.0]])
    log_var = torch.tensor([[0.0, 0.0, math.log(4.0)]])
    # 0.5 (mu^2 + sigma^2 - 1 - log sigma^2)
    want = torch.tensor([[0.0, 0.5, 0.5 * (4.0 - 1.0 - math.log(4.0))]])
    assert torch.allclose(kl_per_dim(mean, log_var), want)


def test_flow_loss_by_hand():
    pred = torch.zeros(1, 2, 2, 2)
    target = torch.zeros(1, 2, 2, 2)
    target[0, 0, 0, 0] = 2.0  # one error of 2 among 8 numbers: 4 / 8
    target[0, 1, 1, 1] = -1.0  # and one of 1: (4 + 1) / 8
    assert float(flow_loss(pred, target)) == pytest.approx(5 / 8)


def test_sparsity_terms_by_hand():
    assert float(structure_l1(torch.tensor([[0.0, 0.25], [0.5, 0.0]]))) == pytest.approx(0.75)
    local = torch.zeros(2, 2, 3, 1, 2)  # (B, 2, D, H, W)
    local[0, 0, 1, 0, 0] = -3.0
    local[1, 1, 2, 0, 1] = 1.0
    # summed over components and dimensions, averaged over the 2 x 2 (batch, pixel) cells
    assert float(local_l1(local)) == pytest.approx(4 / 4)


def test_stage_two_adds_the_sparsity_terms():
    torch.manual_seed(0)
    cfg = TrainConfig(model=ModelConfig(image_size=32, latent_dim=4, kernel_hidden=(8,),
                                        unet_width=4, motion_kernels=(3,)),
                      w_structure=2.0, w_local=3.0)
    model = PSD(cfg.model)
    img, flow = torch.rand(2, 3, 32, 32), torch.randn(2, 2, 32, 32)
    target = flow * cfg.model.flow_scale
    with torch.no_grad():
        t1 = psd_loss(model, model(img, flow), target, img, cfg)
        assert float(t1.structure) == 0 and float(t1.local) == 0
        model.set_active([0, 1])
        t2 = psd_loss(model, model(img, flow), target, img, cfg)
    assert float(t2.local) > 0
    assert float(t2.structure) == pytest.approx(2 * 1 / (1 + math.exp(10)))  # two links at -10
    want = t2.flow + cfg.w_kl * t2.kl + t2.image + 2.0 * t2.structure + 3.0 * t2.local
    assert float(t2.total) == pytest.approx(float(want))


def test_kl_warmup_ramps_the_kl_weight_then_holds_it():
    assert [ramp(f, 0.25) for f in (0.0, 0.05, 0.125, 0.25, 0.9)] == pytest.approx(
        [0.0, 0.2, 0.5, 1.0, 1.0])
    assert ramp(0.0, 0.0) == 1.0  # no warm-up: the full weight from the first step
    cfg = TrainConfig(model=ModelConfig(image_size=32, latent_dim=4, kernel_hidden=(8,),
                                        unet_width=4, motion_kernels=(3,)), w_kl=0.5)
    model = PSD(cfg.model)
    img, flow = torch.rand(2, 3, 32, 32), torch.randn(2, 2, 32, 32)
    with torch.no_grad():
        out = model(img, flow)
        full = psd_loss(model, out, flow * cfg.model.flow_scale, img, cfg)
        quarter = psd_loss(model, out, flow * cfg.model.flow_scale, img, cfg, kl_factor=0.25)
    assert float(full.kl) > 0 and float(quarter.kl) == pytest.approx(float(full.kl))
    # float32 totals: their difference keeps about four digits
    assert float(full.total - quarter.total) == pytest.approx(0.75 * 0.5 * float(full.kl), rel=1e-3)


@pytest.mark.parametrize("warmup", [-0.1, 0.81])
def test_kl_warmup_must_end_within_stage_one(warmup):
    with pytest.raises(PsdError, match="kl_warmup"):
        TrainConfig(kl_warmup=warmup).validate()
