"""Guess What Moves' closed-form flow fit: on a hand-made two-region image with hard masks, each
region's affine (or quadratic) flow is recovered exactly and the loss is ~0; a wrong split, or a
model too simple for the flow, costs more; gradients reach the masks through the fit."""
import pytest
import torch

from baselines.gwm.losses import design, fit_flow, gwm_loss, reconstruct

SIDE = 32


def _grid():
    """x, y (H, W) at the pixel centres in [-1, 1], as `design` places them."""
    r = (torch.arange(SIDE, dtype=torch.float64) * 2 + 1) / SIDE - 1
    y, x = torch.meshgrid(r, r, indexing="ij")
    return x, y


def _two_regions(kind: str):
    """Hard masks (1, 2, H, W) of a left and a right region, and a flow (1, 2, H, W) that is
    one `kind` motion in each; also the true parameters (2, P, 2) in `design`'s column order."""
    x, y = _grid()
    left = (x < 0.2).double()  # not the middle: the regions differ in size
    if kind == "affine":  # columns (x, y, 1)
        theta = torch.tensor([[[2.0, 0.0], [-1.0, 0.3], [0.5, -1.0]],
                              [[0.0, 1.0], [0.7, 0.0], [3.0, 2.0]]], dtype=torch.float64)
    else:  # columns (x, y, x^2, y^2, x y, 1)
        theta = torch.tensor([[[2.0, 0.0], [-1.0, 0.3], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0],
                               [0.5, -1.0]],
                              [[0.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [-0.5, 0.0],
                               [1.0, 0.0]]], dtype=torch.float64)
    basis = design(SIDE, SIDE, kind)  # (N, P)
    fields = torch.einsum("np,kpc->kcn", basis, theta).unflatten(-1, (SIDE, SIDE))  # (2, 2, H, W)
    flow = left * fields[0] + (1 - left) * fields[1]  # (2, H, W)
    masks = torch.stack([left, 1 - left])[None]  # (1, 2, H, W)
    return masks.float(), flow[None].float(), theta


def _loss(masks, flow, kind):
    return float(gwm_loss(masks, flow, flow_model=kind, ridge=1e-6, flow_clip=20.0,
                          criterion="l2", w_rec=1.0).rec)


@pytest.mark.parametrize("kind", ["affine", "quadratic"])
def test_the_fit_recovers_each_regions_motion_exactly(kind):
    masks, flow, theta = _two_regions(kind)
    basis = design(SIDE, SIDE, kind)
    got = fit_flow(masks, flow, basis, ridge=0.0)[0]  # (2, P, 2): plain least squares
    assert torch.allclose(got, theta, atol=1e-4), (got - theta).abs().max()
    # the default ridge moves the ill-determined quadratic terms a little, the flow hardly
    near = fit_flow(masks, flow, basis, ridge=1e-6)[0]
    assert torch.allclose(near, theta, atol=1e-2), (near - theta).abs().max()
    assert torch.allclose(reconstruct(masks, flow, kind, 1e-6), flow, atol=1e-3)
    assert _loss(masks, flow, kind) < 1e-7 * float((flow ** 2).mean())


@pytest.mark.parametrize("kind", ["affine", "quadratic"])
def test_a_wrong_split_costs_more(kind):
    masks, flow, _ = _two_regions(kind)
    x, y = _grid()
    top = (y < 0).float()
    wrong = torch.stack([top, 1 - top])[None]  # (1, 2, H, W): across both motions
    soft = torch.full_like(masks, 0.5)  # every pixel shared: one motion for the whole image
    right = _loss(masks, flow, kind)
    assert _loss(wrong, flow, kind) > 1e-2 and _loss(wrong, flow, kind) > 1e4 * right
    assert _loss(soft, flow, kind) > 1e-2


def test_a_quadratic_flow_needs_the_quadratic_model():
    masks, flow, _ = _two_regions("quadratic")
    assert _loss(masks, flow, "affine") > 1e-2 > 1e4 * _loss(masks, flow, "quadratic")


def test_an_empty_mask_fits_zero_and_the_gradient_reaches_the_masks():
    masks, flow, _ = _two_regions("affine")
    empty = torch.cat([masks, torch.zeros_like(masks[:, :1])], 1)  # a third mask, all zero
    theta = fit_flow(empty, flow, design(SIDE, SIDE, "affine"), ridge=1e-6)
    assert torch.isfinite(theta).all() and theta[0, 2].abs().max() == 0
    # not all equal: with every mask the same, the fits are the same and the softmax's
    # gradient cancels (a saddle the network's random start never sits on)
    logits = torch.randn(1, 2, SIDE, SIDE, generator=torch.Generator().manual_seed(0))
    logits.requires_grad_(True)
    loss = gwm_loss(logits.softmax(1), flow, flow_model="quadratic", ridge=1e-6, flow_clip=20.0,
                    criterion="l2", w_rec=0.03).total
    loss.backward()
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().max() > 0


def test_the_flow_is_clipped_before_the_fit():
    masks, flow, _ = _two_regions("affine")
    wild = flow.clone()
    wild[0, 0, 0, 0] = 1e4  # one wild vector
    clipped = wild.clamp(-20.0, 20.0)
    a = gwm_loss(masks, wild, flow_model="affine", ridge=1e-6, flow_clip=20.0, criterion="l2",
                 w_rec=1.0).rec
    b = gwm_loss(masks, clipped, flow_model="affine", ridge=1e-6, flow_clip=20.0, criterion="l2",
                 w_rec=1.0).rec
    assert float(a) == pytest.approx(float(b)) and float(a) < 1.0


def test_an_unknown_flow_model_is_refused():
    with pytest.raises(ValueError, match="unknown flow model 'cubic'"):
        design(4, 4, "cubic")
