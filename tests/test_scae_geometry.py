"""Template rendering by affine poses (baselines.scae.geometry) against hand-worked cases."""
import math

import numpy as np
import torch

from baselines.scae import geometry

W = 8  # template side = image side: the identity pose copies the template pixel for pixel


def _affine(a, t):
    return torch.tensor([[a[0][0], a[0][1], t[0]], [a[1][0], a[1][1], t[1]]],
                        dtype=torch.float32)[None]  # (1, 2, 3)


def test_identity_copies_the_template():
    tpl = torch.rand(1, 2, W, W, generator=torch.Generator().manual_seed(0))
    out = geometry.render(tpl, _affine([[1, 0], [0, 1]], [0, 0]), W)
    assert torch.allclose(out, tpl, atol=1e-6)


def test_translation_moves_a_pixel_by_that_many_pixels():
    tpl = torch.zeros(1, 1, W, W)
    tpl[0, 0, 2, 3] = 1.0  # row 2, column 3
    # a displacement du in [-1, 1] coordinates is du * W / 2 pixels: 3 right, 1 down
    out = geometry.render(tpl, _affine([[1, 0], [0, 1]], [2 * 3 / W, 2 * 1 / W]), W)[0, 0]
    want = torch.zeros(W, W)
    want[3, 6] = 1.0
    assert torch.allclose(out, want, atol=1e-6)


def test_scale_two_doubles_a_linear_ramp_slope():
    # template value = its own x coordinate; bilinear sampling keeps a linear function exact
    xs = (2 * torch.arange(W, dtype=torch.float32) + 1) / W - 1  # pixel centres
    tpl = xs.expand(W, W)[None, None].clone()  # (1, 1, T, T)
    out = geometry.render(tpl, _affine([[2, 0], [0, 2]], [0, 0]), W)[0, 0]
    # image pixel u samples the template at v = u / 2, all inside the template
    assert torch.allclose(out, xs.expand(W, W) / 2, atol=1e-6)


def test_rotation_by_a_quarter_turn_is_a_transpose_flip():
    tpl = torch.rand(1, 1, W, W, generator=torch.Generator().manual_seed(1))
    out = geometry.render(tpl, geometry.similarity(*[torch.tensor([v]) for v in
                                                     (0.0, 0.0, math.pi / 2, 1.0)]), W)[0, 0]
    # u = R v with y down: the template's pixel (row r, col c) lands at (row c, col W-1-r)
    want = torch.from_numpy(np.rot90(tpl[0, 0].numpy(), k=-1).copy())
    assert torch.allclose(out, want, atol=1e-5)


def test_invert_and_compose():
    g = torch.Generator().manual_seed(2)
    a = geometry.geometric_transform(torch.randn(5, 6, generator=g))  # (5, 2, 3)
    ident = geometry.compose(a, geometry.invert(a))
    assert torch.allclose(ident, _affine([[1, 0], [0, 1]], [0, 0]).expand(5, -1, -1), atol=1e-5)


def test_geometric_transform_determinant_is_the_scale_product():
    raw = torch.tensor([[0.3, -0.7, 0.1, 0.4, 0.2, -0.1]])
    a = geometry.geometric_transform(raw)[0]
    sx, sy = torch.sigmoid(raw[0, 0]) + 0.01, torch.sigmoid(raw[0, 1]) + 0.01
    assert torch.allclose(torch.det(a[:, :2]), sx * sy, atol=1e-6)
    assert torch.allclose(a[:, 2], torch.tanh(5 * raw[0, 4:]), atol=1e-6)
