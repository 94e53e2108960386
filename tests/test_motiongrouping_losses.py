"""Motion Grouping's losses and schedule (baselines/motiongrouping/losses.py, trainer.py) on
hand-worked cases."""
import math

import pytest
import torch

from baselines.motiongrouping import TrainConfig
from baselines.motiongrouping.losses import entropy_loss, mg_loss, recon_loss, weight_factor
from baselines.motiongrouping.trainer import lr_factor


def test_reconstruction_is_the_mean_squared_error_in_pixels():
    # one image, 2 components, 1 x 2 pixels: errors (1, 0) and (2, -1) -> (1 + 0 + 4 + 1) / 4
    pred = torch.tensor([[[[1.0, 2.0]], [[0.0, -1.0]]]])
    assert recon_loss(pred, torch.zeros_like(pred)).item() == pytest.approx(1.5)


def test_entropy_on_hand_worked_pixels():
    # pixel 1 shared evenly by two slots: -2 (0.5 log(0.5 + eps)) ~ log 2; pixel 2 owned by
    # slot 0: -(1 log(1 + eps) + 0) ~ 0; the mean over the two pixels.
    alphas = torch.tensor([[[[0.5, 1.0]], [[0.5, 0.0]]]])  # (B=1, K=2, 1, 2)
    eps = 1e-5
    want = (-math.log(0.5 + eps) - math.log(1 + eps)) / 2
    assert entropy_loss(alphas, eps).item() == pytest.approx(want, rel=1e-6)
    assert entropy_loss(alphas, eps).item() == pytest.approx(math.log(2) / 2, abs=1e-4)


def test_the_total_weights_the_terms():
    pred, target = torch.ones(1, 2, 1, 1), torch.zeros(1, 2, 1, 1)  # mse 1
    alphas = torch.full((1, 4, 1, 1), 0.25)  # entropy log 4
    terms = mg_loss(pred, target, alphas, w_recon=100.0, w_entropy=0.01, eps=0.0)
    assert terms.recon.item() == pytest.approx(1.0)
    assert terms.entropy.item() == pytest.approx(math.log(4))
    assert terms.total.item() == pytest.approx(100.0 + 0.01 * math.log(4))


def test_the_official_schedule():
    cfg = TrainConfig(warmup_steps=200, decay_steps=80_000)
    assert lr_factor(0, cfg) == pytest.approx(1 / 200)  # linear warm-up
    assert lr_factor(99, cfg) == pytest.approx(0.5)
    assert lr_factor(199, cfg) == lr_factor(79_999, cfg) == 1.0
    assert lr_factor(80_000, cfg) == 0.5 and lr_factor(160_000, cfg) == 0.25
    assert weight_factor(79_999, 80_000, 5.0) == 1.0 and weight_factor(160_000, 80_000, 5.0) == 25.0
    assert lr_factor(0, cfg.replace(warmup_steps=0)) == 1.0
