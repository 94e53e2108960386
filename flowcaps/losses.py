"""The self-supervised objective (paper Sec. 4) over sampled pixel centres.

Letters: B batch, K capsules, P sampled points, H, W image side.

L = L_render + w_smooth * L_smooth + w_center * L_center + w_appearance * L_appearance
    + w_slow * L_slow,
with every expectation over pixels estimated at P pixel centres drawn per image (the loss is an
expectation over u, so sampling is an unbiased estimate of it; P = 0 uses the full grid). The
paper's loss is the first three terms.
- L_render: || I'(u + Phi(u)) - I(u) ||^2 (sum over RGB), averaged over a Gaussian pyramid of
  sigmas: flat-coloured shapes only give a photometric gradient in a ~1 px edge band, blurring
  widens that basin. sigma 0 alone is the paper's loss.
- L_smooth: squared finite differences of Phi in x and y (TrainConfig.smooth_form): in the
  [-1, 1] frame ("frame", the paper's; between adjacent pixels on the full grid), or in pixels
  to the +1 px neighbours of sampled points ("pixels").
- L_center: each mask sits at its canonical origin (TrainConfig.center_form): the squared norm
  of its centre of mass in its canonical frame, |E_u[Lambda_k v] / E_u[Lambda_k]|^2 with
  v = P_k^-1 u, summed over capsules ("centroid", the paper's); or, averaged over capsules, the
  mask-weighted squared distance E_u[Lambda_k |v|^2] ("spread") or the same in image units
  E_u[Lambda_k |u - t_k|^2] ("spread_image").
- L_appearance (ours): the visible layers, each filled with its mean colour, rebuild the frame
  (`appearance_loss`).
- L_slow (ours): E_u |Phi(u)|^2 in pixels^2, the slowest of the flows the other terms cannot
  tell apart (`slow_loss`).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from flowcaps import geometry
from flowcaps.config import TrainConfig
from flowcaps.errors import FlowcapsError
from flowcaps.model import FlowCapsules


@dataclass
class LossTerms:
    total: torch.Tensor
    render: torch.Tensor
    smooth: torch.Tensor
    center: torch.Tensor
    appearance: torch.Tensor
    slow: torch.Tensor


def edge_density(img0: torch.Tensor, img1: torch.Tensor, sigma: float) -> torch.Tensor:
    """Where the render loss has signal: |grad I| + |grad I'| widened by a blur: (B, H*W), each
    row sums to 1 (uniform for a pair without an edge)."""
    b, _, h, w = img0.shape
    e = img0.new_zeros(b, 1, h, w)
    for img in (img0, img1):
        gx = F.pad((img[..., :, 1:] - img[..., :, :-1]).abs().sum(1, keepdim=True), (0, 1, 0, 0))
        gy = F.pad((img[..., 1:, :] - img[..., :-1, :]).abs().sum(1, keepdim=True), (0, 0, 0, 1))
        e = e + gx + gy  # (B, 1, H, W)
    e = geometry.gaussian_blur(e, sigma).reshape(b, h * w)  # (B, H*W)
    total = e.sum(1, keepdim=True)  # (B, 1); 0 for a flat pair
    return torch.where(total > 0, e / total.clamp_min(1e-12), torch.full_like(e, 1.0 / (h * w)))


def _gen_device(gen: torch.Generator | None) -> torch.device:
    """Where random draws from `gen` are made (the default generator: the CPU)."""
    return gen.device if gen is not None else torch.device("cpu")


def sample_indices(b: int, h: int, w: int, points: int, gen: torch.Generator | None,
                   device: torch.device, density: torch.Tensor | None = None,
                   mix: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Row-major pixel indices (B, P) and importance weights (B, P), or the full grid.

    With mix > 0, points are drawn from q = (1 - mix) uniform + mix density (with replacement)
    and weighted by 1 / (H W q), so every mean over points stays an unbiased estimate of the
    expectation over pixels, with most samples where the photometric error lives (edges).
    """
    n = h * w
    if points <= 0 or points >= n:
        idx = torch.arange(n, device=device).expand(b, -1)  # (B, H*W)
        return idx, torch.ones(b, n, device=device)
    # Draw where the generator lives: a CPU generator keeps CPU runs reproducible as before,
    # a CUDA one spares a GPU run the copy of the density to the host every step.
    where = _gen_device(gen)
    if mix <= 0 or density is None:
        idx = torch.randint(0, n, (b, points), generator=gen, device=where).to(device)  # (B, P)
        return idx, torch.ones(b, points, device=device)
    q = (1 - mix) / n + mix * density.float().to(where)  # (B, H*W), rows sum to 1
    idx = torch.multinomial(q, points, replacement=True, generator=gen)  # (B, P)
    weight = 1.0 / (n * q.gather(1, idx))  # (B, P)
    return idx.to(device), weight.to(device)


def direction_loss(model: FlowCapsules, caps: tuple, caps_next: tuple,
                   pyr_src: list[torch.Tensor], pyr_dst: list[torch.Tensor], idx: torch.Tensor,
                   cfg: TrainConfig, center_scale: float | torch.Tensor = 1.0,
                   weight: torch.Tensor | None = None) -> LossTerms:
    """Loss of predicting frame `src` by backward-warping frame `dst` with src's capsules.

    caps, caps_next: (shape, pose, depth) of src and of dst; pyr_*: blurred copies (B, 3, H, W);
    weight (B, P): importance weights of the points (None = uniform samples); center_scale: the
    centre term's warm-up factor.
    """
    if weight is None:
        weight = torch.ones(idx.shape, device=idx.device)
    shape, pose, depth = caps
    pose_next = caps_next[1]
    _, _, h, w = pyr_src[0].shape
    u = geometry.index_to_coords(idx, h, w)  # (B, P, 2)
    # The paper's L_smooth over the full grid: differences between its adjacent pixels.
    on_grid = cfg.smooth_form == "frame" and not 0 < cfg.points < h * w
    n_s = min(cfg.smooth_points, u.shape[1]) if cfg.w_smooth > 0 and not on_grid else 0
    if n_s:
        # +1 px neighbours of the first n_s points, evaluated in the same decoder call.
        step = torch.tensor([2.0 / w, 2.0 / h], device=u.device)
        ux = u[:, :n_s] + step * torch.tensor([1.0, 0.0], device=u.device)  # (B, Ps, 2)
        uy = u[:, :n_s] + step * torch.tensor([0.0, 1.0], device=u.device)  # (B, Ps, 2)
        u_all = torch.cat([u, ux, uy], 1)  # (B, P + 2 Ps, 2)
    else:
        u_all = u
    pm = model.masks_at(shape, pose, depth, u_all)
    phi_all = model.flow_at(pm, pose_next, u_all)  # (B, P + 2 Ps, 2)
    p = u.shape[1]
    phi = phi_all[:, :p]  # (B, P, 2)

    vis = pm.visible[:, :, :p]  # (B, K, P)
    render = render_loss(pyr_src, pyr_dst, idx, u, phi, weight)
    if cfg.w_appearance > 0:
        still = (geometry.gather_pixels(pyr_dst[0], idx).float()
                 if cfg.appearance_background == "still" else None)
        appearance = appearance_loss(vis, geometry.gather_pixels(pyr_src[0], idx).float(), weight,
                                     still)
    else:
        appearance = phi.new_zeros(())
    slow = slow_loss(phi, weight, (h, w)) if cfg.w_slow > 0 else phi.new_zeros(())

    if on_grid and cfg.w_smooth > 0:
        smooth = grid_smooth_loss(phi.reshape(-1, h, w, 2))
    elif n_s:
        # "pixels": the flow in pixels, so the weight acts (W/2)^2 times as strongly
        to_px = ((lambda f: geometry.frame_to_pixels(f, h, w)) if cfg.smooth_form == "pixels"
                 else (lambda f: f))
        f0 = to_px(phi[:, :n_s])  # (B, Ps, 2)
        fx = to_px(phi_all[:, p:p + n_s])  # (B, Ps, 2)
        fy = to_px(phi_all[:, p + n_s:])  # (B, Ps, 2)
        diff = ((fx - f0) ** 2).sum(-1) + ((fy - f0) ** 2).sum(-1)  # (B, Ps)
        smooth = (diff * weight[:, :n_s]).mean()
    else:
        smooth = phi.new_zeros(())

    # Weighting the masks makes every E_u in the centre loss importance-weighted as well.
    center = center_loss(pm.masks[:, :, :p] * weight[:, None], pm.v[:, :, :p], pose[..., 3],
                         cfg.center_form)
    total = (render + cfg.w_smooth * smooth + center_scale * cfg.w_center * center
             + cfg.w_appearance * appearance + cfg.w_slow * slow)
    return LossTerms(total=total, render=render, smooth=smooth, center=center,
                     appearance=appearance, slow=slow)


def grid_smooth_loss(phi: torch.Tensor) -> torch.Tensor:
    """The paper's L_smooth: |Phi(u + e) - Phi(u)|^2 in the [-1, 1] frame, averaged over the
    pairs of adjacent pixels along x, plus the same along y. phi (B, H, W, 2) on the grid."""
    dx = ((phi[:, :, 1:] - phi[:, :, :-1]) ** 2).sum(-1)  # (B, H, W-1)
    dy = ((phi[:, 1:] - phi[:, :-1]) ** 2).sum(-1)  # (B, H-1, W)
    return dx.mean() + dy.mean()


def render_loss(pyr_src: list[torch.Tensor], pyr_dst: list[torch.Tensor], idx: torch.Tensor,
                u: torch.Tensor, phi: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """|| dst(u + Phi(u)) - src(u) ||^2 at the points, weighted, averaged over the pyramid.

    pyr_*: blurred copies (B, 3, H, W); idx (B, P) the points' pixel indices, u (B, P, 2) their
    coordinates, phi (B, P, 2) the flow there, weight (B, P).
    """
    render = phi.new_zeros(())
    for src, dst in zip(pyr_src, pyr_dst):
        target = geometry.gather_pixels(src, idx).float()  # (B, 3, P)
        pred = geometry.sample_at(dst, u + phi).float()  # (B, 3, P)
        render = render + (((pred - target) ** 2).sum(1) * weight).mean()
    return render / len(pyr_src)


def slow_loss(phi: torch.Tensor, weight: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """E_u |Phi(u)|^2 in pixels^2: phi (B, P, 2) the flow at the points (image frame), weight (B, P).

    A flat region looks the same under any motion, so no other term sees a capsule that spreads
    over the plain background next to a shape and moves with it (the halo of flow around the
    shapes). Of motions the image cannot tell apart this prefers the slowest, the background's
    none; where the image does tell, the render loss outweighs a small w_slow.
    """
    flow = geometry.frame_to_pixels(phi.float(), *size)  # (B, P, 2)
    return ((flow ** 2).sum(-1) * weight).mean()


def appearance_loss(vis: torch.Tensor, target: torch.Tensor, weight: torch.Tensor,
                    still: torch.Tensor | None = None) -> torch.Tensor:
    """Each visible layer explains its pixels with one colour: a dense signal for the masks.

    vis (B, K, P) capsule visibility (the background takes the rest), target (B, 3, P) the src
    pixels, weight (B, P) importance weights. Each capsule layer's colour is its
    visibility-weighted mean (closed form); the loss is the squared error of the layered image.
    The flow loss only sees edges of flat shapes; this one also constrains their interiors.
    The background layer is one flat colour too, unless `still` (B, 3, P) gives it the other
    frame's pixels (TrainConfig.appearance_background "still"): a static background then explains
    itself however textured, and a capsule gains nothing by carving a photograph into regions.
    """
    bg = (1 - vis.sum(1, keepdim=True)).clamp_min(0)  # (B, 1, P)
    layers = vis if still is not None else torch.cat([vis, bg], 1)  # (B, K or K+1, P)
    wl = layers * weight[:, None]  # (B, K(+1), P)
    colour = torch.einsum("bkp,bcp->bkc", wl, target) / wl.sum(2)[..., None].clamp_min(1e-6)  # (B, K(+1), 3)
    recon = torch.einsum("bkp,bkc->bcp", layers, colour)  # (B, 3, P)
    if still is not None:
        recon = recon + bg * still  # (B, 3, P)
    return (((recon - target) ** 2).sum(1) * weight).mean()


def center_loss(masks: torch.Tensor, v: torch.Tensor, scale: torch.Tensor, form: str) -> torch.Tensor:
    """masks (B, K, P), v (B, K, P, 2), scale (B, K) -> scalar, averaged over B.

    "centroid" (the paper's): sum_k |sum_u Lambda_k v / sum_u Lambda_k|^2, the centre of mass of
    each mask in its canonical frame pulled to the origin; the spreads average over K."""
    if form == "centroid":
        mass = masks.sum(2).clamp_min(1e-6)  # (B, K); an empty mask has no centre to pull
        centre = (masks[..., None] * v).sum(2) / mass[..., None]  # (B, K, 2)
        return (centre ** 2).sum(-1).sum(1).mean()
    d2 = (v ** 2).sum(-1)  # (B, K, P) = |v|^2
    if form == "spread_image":
        d2 = d2 * scale[..., None] ** 2  # (B, K, P) = |u - t|^2
    return (masks * d2).mean(2).mean()  # E_u over the points, then B, K


def shuffle_channels(images: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """images (N, 3, H, W) with each image's channels in its own random order (TrainConfig.colour_shuffle)."""
    n, c, h, w = images.shape
    order = torch.rand(n, c, generator=gen, device=_gen_device(gen)).argsort(1).to(images.device)  # (N, 3)
    return images.gather(1, order[:, :, None, None].expand(-1, -1, h, w))  # (N, 3, H, W)


def pair_loss(model: FlowCapsules, img0: torch.Tensor, img1: torch.Tensor, cfg: TrainConfig,
              gen: torch.Generator | None, center_scale: float | torch.Tensor = 1.0) -> LossTerms:
    """The training loss of a batch of pairs img0, img1 (B, 3, H, W) in [0, 1].

    Both frames are parsed (the flow needs both poses); with `both_directions` the pair is also
    used the other way round (I' predicted from I), doubling the signal per encoder pass.
    """
    b, _, h, w = img0.shape
    ctx = torch.autocast(img0.device.type, dtype=torch.bfloat16, enabled=cfg.bf16)
    both = torch.cat([img0, img1], 0)  # (2B, 3, H, W)
    if cfg.colour_shuffle:
        both = shuffle_channels(both, gen)
    with ctx:
        caps = model.encode(both)
    c0 = tuple(x[:b] for x in caps)
    c1 = tuple(x[b:] for x in caps)
    pyr0 = [geometry.gaussian_blur(img0, s) for s in cfg.blur_sigmas]
    pyr1 = [geometry.gaussian_blur(img1, s) for s in cfg.blur_sigmas]
    density = edge_density(img0, img1, cfg.edge_sigma) if cfg.edge_sampling > 0 else None
    idx, wt = sample_indices(b, h, w, cfg.points, gen, img0.device, density, cfg.edge_sampling)
    with ctx:
        terms = [direction_loss(model, c0, c1, pyr0, pyr1, idx, cfg, center_scale, wt)]
        if cfg.both_directions:
            idx1, wt1 = sample_indices(b, h, w, cfg.points, gen, img0.device, density,
                                       cfg.edge_sampling)
            terms.append(direction_loss(model, c1, c0, pyr1, pyr0, idx1, cfg, center_scale, wt1))
    return LossTerms(**{f.name: sum(getattr(t, f.name) for t in terms) / len(terms)
                        for f in fields(LossTerms)})
