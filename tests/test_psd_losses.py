"""PSD's loss terms on hand-worked cases."""
import math

import pytest
import torch

from baselines.psd.config import ModelConfig, TrainConfig
from baselines.psd.losses import flow_loss, kl_per_dim, local_l1, psd_loss, structure_l1
from baselines.psd.model import PSD


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
