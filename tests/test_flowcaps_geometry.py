"""Sign conventions of poses, flow and warping, checked on a known translation."""
import math

import torch

from flowcaps import geometry
from flowcaps.losses import direction_loss
from flowcaps.model import FlowCapsules
from tiny_flowcaps import model_config, train_config

H = W = 32


def _square_image(cx: float, cy: float, half: float = 5.0) -> torch.Tensor:
    """A red square centred at pixel coordinates (cx, cy) on a grey background: (1, 3, H, W)."""
    img = torch.full((1, 3, H, W), 0.8)
    ys, xs = torch.meshgrid(torch.arange(H) + 0.5, torch.arange(W) + 0.5, indexing="ij")
    inside = ((xs - cx).abs() <= half) & ((ys - cy).abs() <= half)
    img[0, :, inside] = torch.tensor([0.9, 0.1, 0.1])[:, None]
    return img


def _pose_px(cx: float, cy: float, radius_px: float) -> torch.Tensor:
    """One capsule's pose (1, 1, 4) from a pixel centre and an image-frame radius in pixels."""
    return torch.tensor([[[2 * cx / W - 1, 2 * cy / H - 1, 0.0, 2 * radius_px / W]]])


def _prior_only_model() -> FlowCapsules:
    """K=1, the decoder's learned part zeroed: Lambda is the disc prior of radius `scale`."""
    model = FlowCapsules(model_config(image_size=H, num_capsules=1, capsule_dim=8,
                                      enc_channels=(4,), mask_prior=8.0, background="uniform"))
    with torch.no_grad():
        model.decoder.out.weight.zero_()
    return model


def test_canonical_round_trip_and_rotation_sense():
    gen = torch.Generator().manual_seed(0)
    pose = torch.cat([torch.rand(2, 3, 2, generator=gen) - 0.5, torch.rand(2, 3, 1, generator=gen) * 3,
                      0.1 + torch.rand(2, 3, 1, generator=gen)], -1)  # (B, K, 4)
    u = torch.rand(2, 5, 2, generator=gen) * 2 - 1  # (B, P, 2)
    v = geometry.to_canonical(pose, u)
    back = geometry.from_canonical(pose, v)
    assert torch.allclose(back, u[:, None].expand_as(back), atol=1e-5)
    # a = +pi/2 maps the canonical +x axis to image +y (down): clockwise on screen.
    p = torch.tensor([[[0.0, 0.0, math.pi / 2, 1.0]]])
    out = geometry.from_canonical(p, torch.tensor([[[[1.0, 0.0]]]]))
    assert torch.allclose(out, torch.tensor([[[[0.0, 1.0]]]]), atol=1e-6)


def test_pixel_centres_match_grid_sample_and_units():
    img = torch.arange(H * W, dtype=torch.float32).view(1, 1, H, W)
    u = geometry.pixel_centres(H, W)[None]  # (1, H*W, 2)
    assert torch.allclose(geometry.sample_at(img, u)[0, 0], img.flatten(), atol=1e-3)
    idx = torch.tensor([[0, 5, W + 3, H * W - 1]])
    assert torch.allclose(geometry.gather_pixels(img, idx), geometry.sample_at(
        img, geometry.index_to_coords(idx, H, W)), atol=1e-3)
    # one pixel to the right is 2 / W in the image frame
    assert torch.allclose(geometry.frame_to_pixels(torch.tensor([2 / W, 4 / H]), H, W),
                          torch.tensor([1.0, 2.0]))


def test_blur_keeps_constants_and_mass():
    flat = torch.full((1, 3, 16, 16), 0.7)
    assert torch.allclose(geometry.gaussian_blur(flat, 2.0), flat, atol=1e-6)
    dot = torch.zeros(1, 1, 17, 17)
    dot[0, 0, 8, 8] = 1
    blurred = geometry.gaussian_blur(dot, 1.5)
    assert abs(float(blurred.sum()) - 1) < 1e-5 and float(blurred.max()) < 0.2
    assert geometry.gaussian_blur(dot, 0.0) is dot


def test_known_translation_flow_and_warp_sign():
    """A square moves by (+3, -2) px: the flow is (+3, -2) on it and only that sign renders I."""
    dx, dy = 3.0, -2.0
    img0, img1 = _square_image(14.5, 16.5), _square_image(14.5 + dx, 16.5 + dy)
    model = _prior_only_model()
    pose0 = _pose_px(14.5, 16.5, 9.0)
    shape = torch.zeros(1, 1, 3)
    depth = torch.ones(1, 1)

    def fake_encode(images):
        moved = not torch.equal(images, img0)
        pose = _pose_px(14.5 + dx, 16.5 + dy, 9.0) if moved else pose0
        return shape, pose, depth

    model.encode = fake_encode
    flow = model.flow(img0, img1)  # (1, 2, H, W)
    assert torch.allclose(flow[0, :, 16, 14], torch.tensor([dx, dy]), atol=1e-4)

    cfg = train_config(model=model.config, points=0, smooth_points=0, blur_sigmas=(0.0,))
    idx = torch.arange(H * W)[None]

    def render(pose_next):
        return float(direction_loss(model, (shape, pose0, depth), (shape, pose_next, depth), [img0], [img1],
                                    idx, cfg).render.detach())

    right = render(_pose_px(14.5 + dx, 16.5 + dy, 9.0))
    wrong = render(_pose_px(14.5 - dx, 16.5 - dy, 9.0))
    still = render(pose0)
    assert right < 1e-4 < still < wrong


def test_importance_sampling_is_unbiased():
    """Edge-weighted samples with 1 / (H W q) weights estimate the mean over all pixels."""
    from flowcaps.losses import edge_density, sample_indices

    img0, img1 = _square_image(14.5, 16.5), _square_image(17.5, 14.5)
    f = (img0 - img1).abs().sum(1).reshape(1, -1)  # (1, H*W): lives on the edges only
    dens = edge_density(img0, img1, 2.0)
    assert abs(float(dens.sum()) - 1) < 1e-5
    gen = torch.Generator().manual_seed(0)
    draws = [sample_indices(1, H, W, 1000, gen, torch.device("cpu"), dens, 0.8) for _ in range(30)]
    idx = torch.cat([d[0] for d in draws], 1)  # (1, 30000)
    wt = torch.cat([d[1] for d in draws], 1)
    estimate = float((f.gather(1, idx) * wt).mean())
    assert abs(estimate - float(f.mean())) < 0.03 * float(f.mean())
    # most samples land where the density is (edges), unlike uniform sampling
    assert float((f.gather(1, idx) > 0).float().mean()) > 3 * float((f > 0).float().mean())


def test_edge_density_of_a_flat_pair_is_uniform():
    """No edge anywhere: the points are drawn uniformly, with weights 1 (an unbiased estimate)."""
    from flowcaps.losses import edge_density

    flat = torch.full((1, 3, H, W), 0.5)
    dens = edge_density(flat, flat, 1.0)  # (1, H*W)
    assert torch.allclose(dens, torch.full_like(dens, 1 / (H * W)))
