"""R-NEM's loss (baselines/rnem/losses.py) on a hand-worked case."""
import pytest
import torch

from baselines.rnem.losses import rnem_loss


def test_loss_on_a_hand_worked_pixel():
    # One pixel, one channel, two groups: x = 1, mu = (0.5, 0), gamma = (0.8, 0.2), sigma = 0.5
    # (1 / (2 sigma^2) = 2), prior 0.
    # intra = 0.8 * 2 * (0.5 - 1)^2 + 0.2 * 2 * (0 - 1)^2 = 0.4 + 0.4 = 0.8
    # inter = (1 - 0.8) * 2 * 0.5^2 + (1 - 0.2) * 2 * 0^2 = 0.1
    mu = torch.tensor([0.5, 0.0]).view(1, 2, 1, 1, 1)
    gamma = torch.tensor([0.8, 0.2]).view(1, 2, 1, 1, 1)
    target = torch.ones(1, 1, 1, 1)
    terms = rnem_loss(mu, gamma, target, sigma=0.5, prior_mean=0.0)
    assert terms.intra.item() == pytest.approx(0.8)
    assert terms.inter.item() == pytest.approx(0.1)
    assert terms.total.item() == pytest.approx(0.9)


def test_loss_sums_pixels_and_channels_and_averages_the_batch():
    mu = torch.full((2, 3, 3, 4, 4), 0.5)
    gamma = torch.full((2, 3, 1, 4, 4), 1 / 3)
    target = torch.ones(2, 3, 4, 4)
    terms = rnem_loss(mu, gamma, target, sigma=1.0, prior_mean=0.0)
    # per value: intra 1/3 * 0.125, inter 2/3 * 0.125; 3 groups x 3 channels x 16 pixels
    assert terms.intra.item() == pytest.approx(144 * 0.125 / 3)
    assert terms.inter.item() == pytest.approx(144 * 0.125 * 2 / 3)


def test_no_gradient_flows_into_gamma():
    mu = torch.rand(1, 2, 3, 2, 2, requires_grad=True)
    gamma = torch.softmax(torch.rand(1, 2, 1, 2, 2, requires_grad=True), 1)
    gamma.retain_grad()
    rnem_loss(mu, gamma, torch.rand(1, 3, 2, 2), 0.25, 0.0).total.backward()
    assert gamma.grad is None and mu.grad is not None and mu.grad.abs().sum() > 0
