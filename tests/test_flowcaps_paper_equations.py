"""The `paper` profile's equations (paper Sec. 3-4), each computed by hand with numpy and plain
loops on a tiny case (K = 2, 8 x 8 pixels, known poses, depths and shape codes) and compared with
what the model and the losses compute. Each test fails if its term changes (a normalisation
dropped, other units, another layer count).

Letters: K capsules, P pixels (row-major), C capsule size.
"""
import math

import numpy as np
import pytest
import torch

from flowcaps.losses import direction_loss, pair_loss
from flowcaps.model import FlowCapsules
from flowcaps.profiles import paper

SIDE = 8
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805
POSE0 = [[0.2, -0.1, 0.3, 0.5], [-0.3, 0.25, -0.5, 0.7]]  # (tx, ty, angle, scale) per capsule
POSE1 = [[0.3, -0.05, 0.4, 0.55], [-0.35, 0.2, -0.45, 0.65]]  # the second frame's
DEPTH = [2.0, 3.5]


def _cfg():
    """The paper profile at a tiny size: only sizes change, every equation is the paper's."""
    return paper(out="x").replace(model={"image_size": SIDE, "num_capsules": 2,
                                         "enc_channels": (2,), "enc_hidden": 4, "dec_hidden": 5})


def _model(cfg) -> FlowCapsules:
    torch.manual_seed(0)
    model = FlowCapsules(cfg.model)
    with torch.no_grad():  # visible weights everywhere (the init shrinks the output layer)
        model.decoder.out.weight.normal_(0, 1.0)
        model.decoder.out.bias.fill_(0.3)
    return model


def _images(seed: int) -> torch.Tensor:
    return torch.rand(1, 3, SIDE, SIDE, generator=torch.Generator().manual_seed(seed))


def _caps(cfg, pose):
    shape = torch.randn(1, 2, cfg.model.shape_dim, generator=torch.Generator().manual_seed(3))
    return shape, torch.tensor([pose]), torch.tensor([DEPTH])


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


# ---- the equations by hand ----

def selu(x):
    return SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * (np.exp(np.minimum(x, 0)) - 1))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def pixel_centres(side):
    """u = (x, y) of each pixel centre in the [-1, 1] frame, row-major: (P, 2)."""
    return np.array([[(2 * j + 1) / side - 1, (2 * i + 1) / side - 1]
                     for i in range(side) for j in range(side)])


def rot(a):
    return np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])


def to_canonical(pose, u):
    """Gamma^-1(u) = R(a)^T (u - t) / s: pose (4,), u (P, 2) -> (P, 2)."""
    t, a, s = np.array(pose[:2]), pose[2], pose[3]
    return np.array([rot(a).T @ (p - t) / s for p in u])


def from_canonical(pose, v):
    """Gamma(v) = s R(a) v + t."""
    t, a, s = np.array(pose[:2]), pose[2], pose[3]
    return np.array([s * rot(a) @ q + t for q in v])


def decoder(model, shape_k, v):
    """Lambda_k = sigmoid(D(v; s_k)): SELU layers, then a linear output (plus the disc prior)."""
    d = model.decoder
    h = selu(v @ _np(d.in_v.weight).T + _np(d.in_s.weight) @ shape_k + _np(d.in_s.bias))
    for layer in d.hidden:
        if isinstance(layer, torch.nn.Linear):
            h = selu(h @ _np(layer.weight).T + _np(layer.bias))
    logit = h @ _np(d.out.weight)[0] + _np(d.out.bias)[0]
    logit = logit + model.config.mask_prior * (1 - (v ** 2).sum(1))
    return sigmoid(logit)


def masks_by_hand(model, shape, pose, depth, u):
    """v (K, P, 2), Lambda (K, P) and Lambda+ = softmax_k(d_k Lambda_k) (K, P)."""
    v = np.stack([to_canonical(pose[k], u) for k in range(len(pose))])
    lam = np.stack([decoder(model, shape[k], v[k]) for k in range(len(pose))])
    score = np.array(depth)[:, None] * lam
    vis = np.exp(score) / np.exp(score).sum(0, keepdims=True)
    return v, lam, vis


def flow_by_hand(v, vis, pose1, u):
    """Phi(u) = sum_k Lambda+_k(u) [Gamma'_k(Gamma_k^-1(u)) - u]: (P, 2)."""
    return sum(vis[k][:, None] * (from_canonical(pose1[k], v[k]) - u) for k in range(len(pose1)))


def bilinear(img, x, y):
    """img (3, H, W) at a frame point, as grid_sample (align_corners=False, border padding)."""
    _, h, w = img.shape
    px = min(max(((x + 1) * w - 1) / 2, 0), w - 1)
    py = min(max(((y + 1) * h - 1) / 2, 0), h - 1)
    x0, y0 = int(math.floor(px)), int(math.floor(py))
    x1, y1 = min(x0 + 1, w - 1), min(y0 + 1, h - 1)
    fx, fy = px - x0, py - y0
    return ((1 - fx) * (1 - fy) * img[:, y0, x0] + fx * (1 - fy) * img[:, y0, x1]
            + (1 - fx) * fy * img[:, y1, x0] + fx * fy * img[:, y1, x1])


def render_by_hand(img0, img1, u, phi):
    """mean over all pixels of ||I'(u + Phi(u)) - I(u)||^2."""
    errs = []
    for p in range(len(u)):
        i, j = divmod(p, SIDE)
        pred = bilinear(img1, *(u[p] + phi[p]))
        errs.append(((pred - img0[:, i, j]) ** 2).sum())
    return float(np.mean(errs))


def smooth_by_hand(phi):
    """Squared differences of Phi (in the [-1, 1] frame) between adjacent pixels, x then y."""
    grid = phi.reshape(SIDE, SIDE, 2)
    dx = [((grid[i, j + 1] - grid[i, j]) ** 2).sum() for i in range(SIDE) for j in range(SIDE - 1)]
    dy = [((grid[i + 1, j] - grid[i, j]) ** 2).sum() for i in range(SIDE - 1) for j in range(SIDE)]
    return float(np.mean(dx) + np.mean(dy))


def center_by_hand(v, lam):
    """sum_k || sum_u Lambda_k(u) v_k(u) / sum_u Lambda_k(u) ||^2."""
    total = 0.0
    for k in range(len(lam)):
        centre = (lam[k][:, None] * v[k]).sum(0) / lam[k].sum()
        total += float((centre ** 2).sum())
    return total


def conv3x3(x, w, b):
    """x (Cin, H, W), w (Cout, Cin, 3, 3), zero padding 1 (a cross-correlation, as torch's)."""
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    out = np.zeros((w.shape[0],) + x.shape[1:])
    for o in range(w.shape[0]):
        for i in range(x.shape[1]):
            for j in range(x.shape[2]):
                out[o, i, j] = (xp[:, i:i + 3, j:j + 3] * w[o]).sum() + b[o]
    return out


# ---- the tests ----

def test_the_paper_profile_states_the_papers_settings():
    cfg = paper(out="x")
    m = cfg.model
    assert (m.num_capsules, m.capsule_dim, m.shape_dim, m.dec_depth) == (8, 32, 27, 6)
    assert (m.translation_head, m.shape_code, m.layering, m.background) == ("fc", "image",
                                                                            "softmax", "uniform")
    assert m.depth_ordering and not m.coord_channels and not m.pooled_params and m.enc_norm == 0
    assert (cfg.lr, cfg.lr_schedule, cfg.warmup_steps, cfg.loop.epochs) == (1e-4, "constant", 0, 150)
    assert (cfg.w_smooth, cfg.w_center, cfg.w_appearance, cfg.w_slow) == (1e-4, 1e-2, 0.0, 0.0)
    assert (cfg.points, cfg.smooth_form, cfg.center_form) == (0, "frame", "centroid")
    assert (cfg.blur_sigmas, cfg.both_directions, cfg.colour_shuffle) == ((0.0,), False, False)
    assert cfg.center_warmup == 0 and cfg.prior_anneal == 0 and cfg.edge_sampling == 0


def test_encoder_convs_relu_pool_tanh_fc_then_the_capsule_split():
    cfg = _cfg()
    model = _model(cfg)
    img = _images(1)
    x = _np(img[0])
    enc = model.encoder
    for conv in enc.convs:  # conv + ReLU, then 2 x 2 average pooling
        x = np.maximum(conv3x3(x, _np(conv.weight), _np(conv.bias)), 0)
        c, h, w = x.shape
        x = x.reshape(c, h // 2, 2, w // 2, 2).mean((2, 4))
    hidden = np.tanh(_np(enc.fc.weight) @ x.reshape(-1) + _np(enc.fc.bias))
    raw = (_np(enc.head.weight) @ hidden + _np(enc.head.bias)).reshape(2, 32)  # (K, C)
    m = cfg.model
    shape, pose, depth = model.encode(img)
    assert shape.shape == (1, 2, 27)  # |s| = C - 5
    np.testing.assert_allclose(_np(shape[0]), raw[:, :27], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(pose[0, :, :2]), m.trans_bound * np.tanh(raw[:, 27:29]),
                               rtol=1e-5, atol=1e-6)  # translation (2)
    np.testing.assert_allclose(_np(pose[0, :, 2]), raw[:, 29], rtol=1e-5, atol=1e-6)  # rotation
    np.testing.assert_allclose(_np(pose[0, :, 3]), m.scale_min + np.log1p(np.exp(raw[:, 30])),
                               rtol=1e-5, atol=1e-6)  # scale (1), kept positive
    np.testing.assert_allclose(_np(depth[0]), raw[:, 31], rtol=1e-5, atol=1e-6)  # depth d_k


def test_decoder_has_six_selu_layers_and_masks_are_its_sigmoid_at_the_canonical_points():
    cfg = _cfg()
    model = _model(cfg)
    selus = 1 + sum(isinstance(layer, torch.nn.SELU) for layer in model.decoder.hidden)
    assert selus == 6  # Table 3's headline decoder
    shape, pose, depth = _caps(cfg, POSE0)
    u = pixel_centres(SIDE)
    pm = model.masks_at(shape, pose, depth, torch.tensor(u, dtype=torch.float32)[None])
    v, lam, vis = masks_by_hand(model, _np(shape[0]), POSE0, DEPTH, u)
    np.testing.assert_allclose(_np(pm.v[0]), v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(pm.masks[0]), lam, rtol=1e-4, atol=1e-6)
    assert lam.min() < 0.3 and lam.max() > 0.7  # a case where the masks differ over the grid


def test_visible_masks_are_the_softmax_of_depth_times_mask():
    cfg = _cfg()
    model = _model(cfg)
    shape, pose, depth = _caps(cfg, POSE0)
    u = pixel_centres(SIDE)
    pm = model.masks_at(shape, pose, depth, torch.tensor(u, dtype=torch.float32)[None])
    _, _, vis = masks_by_hand(model, _np(shape[0]), POSE0, DEPTH, u)
    np.testing.assert_allclose(_np(pm.visible[0]), vis, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(vis.sum(0), 1.0)


def test_without_depth_ordering_the_visible_masks_are_the_normalised_softmax_of_the_masks():
    """Table 3's depth-ordering-off row: Lambda+_k = softmax_k(Lambda_k), normalised over k as
    the paper's visible rule asks before its 0.5 threshold (benchmark.metrics.visible_masks)."""
    cfg = _cfg().replace(model={"depth_ordering": False})
    model = _model(cfg)
    shape, pose, depth = _caps(cfg, POSE0)
    u = pixel_centres(SIDE)
    pm = model.masks_at(shape, pose, depth, torch.tensor(u, dtype=torch.float32)[None])
    _, lam, _ = masks_by_hand(model, _np(shape[0]), POSE0, DEPTH, u)
    want = np.exp(lam) / np.exp(lam).sum(0, keepdims=True)
    np.testing.assert_allclose(_np(pm.visible[0]), want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(_np(pm.visible[0]).sum(0), 1.0, rtol=1e-6)


def test_flow_is_the_visible_weighted_sum_of_each_capsules_motion():
    cfg = _cfg()
    model = _model(cfg)
    shape, pose, depth = _caps(cfg, POSE0)
    u = pixel_centres(SIDE)
    ut = torch.tensor(u, dtype=torch.float32)[None]
    phi = model.flow_at(model.masks_at(shape, pose, depth, ut), torch.tensor([POSE1]), ut)
    v, _, vis = masks_by_hand(model, _np(shape[0]), POSE0, DEPTH, u)
    np.testing.assert_allclose(_np(phi[0]), flow_by_hand(v, vis, POSE1, u), rtol=1e-4, atol=1e-6)


def _terms(cfg, model, img0, img1):
    """The losses' terms of one direction on the full grid, and the same by hand."""
    shape, pose, depth = _caps(cfg, POSE0)
    caps1 = _caps(cfg, POSE1)
    idx = torch.arange(SIDE * SIDE)[None]  # the full grid, row-major
    with torch.no_grad():
        got = direction_loss(model, (shape, pose, depth), caps1, [img0], [img1], idx, cfg)
    u = pixel_centres(SIDE)
    v, lam, vis = masks_by_hand(model, _np(shape[0]), POSE0, DEPTH, u)
    phi = flow_by_hand(v, vis, POSE1, u)
    want = {"render": render_by_hand(_np(img0[0]), _np(img1[0]), u, phi),
            "smooth": smooth_by_hand(phi), "center": center_by_hand(v, lam)}
    return got, want


@pytest.mark.parametrize("term", ["render", "smooth", "center"])
def test_each_loss_term_is_the_papers(term):
    cfg = _cfg()
    got, want = _terms(cfg, _model(cfg), _images(1), _images(2))
    assert want[term] > 0
    assert float(getattr(got, term)) == pytest.approx(want[term], rel=1e-4)


def test_the_total_weighs_smooth_1e_4_and_center_1e_2():
    cfg = _cfg()
    got, want = _terms(cfg, _model(cfg), _images(1), _images(2))
    total = want["render"] + 1e-4 * want["smooth"] + 1e-2 * want["center"]
    assert float(got.total) == pytest.approx(total, rel=1e-4)


def test_the_paper_pair_loss_is_one_direction_over_every_pixel_of_the_sharp_frames():
    """pair_loss with the paper profile: the encoder's capsules of both frames, then the terms
    above by hand (no sampling, no blur, no second direction, no colour shuffle)."""
    cfg = _cfg()
    model = _model(cfg)
    img0, img1 = _images(1), _images(2)
    with torch.no_grad():
        got = pair_loss(model, img0, img1, cfg, torch.Generator().manual_seed(0))
    shape, pose0, depth = (_np(t[0]) for t in model.encode(img0))
    pose1 = _np(model.encode(img1)[1][0])
    u = pixel_centres(SIDE)
    v, lam, vis = masks_by_hand(model, shape, pose0, depth, u)
    phi = flow_by_hand(v, vis, pose1, u)
    want = (render_by_hand(_np(img0[0]), _np(img1[0]), u, phi) + 1e-4 * smooth_by_hand(phi)
            + 1e-2 * center_by_hand(v, lam))
    assert float(got.total) == pytest.approx(want, rel=1e-4)
