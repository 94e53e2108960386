"""The self-supervised objective (paper Sec. 4) over sampled pixel centres.

Letters: B batch, K capsules, P sampled points, H, W image side.

L = L_render + w_smooth * L_smooth + w_center * L_center, with every expectation over pixels
estimated at P pixel centres drawn per image (the loss is an expectation over u, so sampling is
an unbiased estimate of it; P = 0 uses the full grid).
- L_render: || I'(u + Phi(u)) - I(u) ||^2 (sum over RGB), averaged over a Gaussian pyramid of
  sigmas: flat-coloured shapes only give a photometric gradient in a ~1 px edge band, blurring
  widens that basin. sigma 0 alone is the paper's loss.
- L_smooth: squared finite differences of Phi to the +1 px neighbours in x and y (pixels^2).
- L_center: each mask sits at its canonical origin, averaged over capsules, in one of three
  forms (TrainConfig.center_form): the mask-weighted squared distance E_u[Lambda_k |v|^2] with
  v = P_k^-1 u ("spread"), the same in image units E_u[Lambda_k |u - t_k|^2] ("spread_image",
  the default), or the squared distance of the mask's centre of mass
  |E_u[Lambda_k v] / E_u[Lambda_k]|^2 ("centroid").
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from flowcaps import geometry
from flowcaps.config import TrainConfig
from flowcaps.model import FlowCapsules


@dataclass
class LossTerms:
    total: torch.Tensor
    render: torch.Tensor
    smooth: torch.Tensor
    center: torch.Tensor
    appearance: torch.Tensor
    overlap: torch.Tensor
    consistency: torch.Tensor


def edge_density(img0: torch.Tensor, img1: torch.Tensor, sigma: float) -> torch.Tensor:
    """Where the render loss has signal: |grad I| + |grad I'| widened by a blur: (B, H*W), sums to 1."""
    b, _, h, w = img0.shape
    e = img0.new_zeros(b, 1, h, w)
    for img in (img0, img1):
        gx = F.pad((img[..., :, 1:] - img[..., :, :-1]).abs().sum(1, keepdim=True), (0, 1, 0, 0))
        gy = F.pad((img[..., 1:, :] - img[..., :-1, :]).abs().sum(1, keepdim=True), (0, 0, 0, 1))
        e = e + gx + gy  # (B, 1, H, W)
    e = geometry.gaussian_blur(e, sigma).reshape(b, h * w)  # (B, H*W)
    return e / e.sum(1, keepdim=True).clamp_min(1e-12)


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
                   weight: torch.Tensor | None = None,
                   seg: torch.Tensor | None = None,
                   blur_gain: float | torch.Tensor = 1.0,
                   overlap_gain: float | torch.Tensor = 1.0) -> LossTerms:
    """Loss of predicting frame `src` by backward-warping frame `dst` with src's capsules.

    caps, caps_next: (shape, pose, depth) of src and of dst; pyr_*: blurred copies (B, 3, H, W);
    weight (B, P): importance weights of the points (None = uniform samples); seg (B, K, h, w):
    src's coarse cell ownership of the "segment" head, scored like the masks when w_segment > 0;
    blur_gain: the weight of the pyramid's blurred levels (TrainConfig.blur_fade); overlap_gain:
    the overlap term's ramp (TrainConfig.overlap_start).
    """
    if weight is None:
        weight = torch.ones(idx.shape, device=idx.device)
    shape, pose, depth = caps
    pose_next = caps_next[1]
    _, _, h, w = pyr_src[0].shape
    u = geometry.index_to_coords(idx, h, w)  # (B, P, 2)
    n_s = min(cfg.smooth_points, u.shape[1]) if cfg.w_smooth > 0 else 0
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
    rweight = weight
    if cfg.occlusion_aware:
        rweight = weight * occlusion_keep(model, vis, caps_next, u + phi)  # (B, P)
    levels = [1.0 if sigma == 0 else blur_gain for sigma in cfg.blur_sigmas]
    render = render_loss(pyr_src, pyr_dst, idx, u, phi, rweight, levels)
    if cfg.w_appearance > 0:
        appearance = appearance_loss(vis, geometry.gather_pixels(pyr_src[0], idx).float(), weight)
    else:
        appearance = phi.new_zeros(())
    if seg is not None and cfg.w_segment > 0:
        segment = segment_loss(seg, pm.v[:, :, :p], pose_next, u, pyr_src, pyr_dst, idx, weight,
                               cfg.w_appearance)
    else:
        segment = phi.new_zeros(())
    if cfg.w_overlap > 0:
        overlap = overlap_loss(pm.masks[:, :, :p], pm.v[:, :, :p], pose_next, u, weight,
                               cfg.overlap_tau, (h, w))
    else:
        overlap = phi.new_zeros(())

    if n_s:
        f0 = geometry.frame_to_pixels(phi[:, :n_s], h, w)  # (B, Ps, 2)
        fx = geometry.frame_to_pixels(phi_all[:, p:p + n_s], h, w)  # (B, Ps, 2)
        fy = geometry.frame_to_pixels(phi_all[:, p + n_s:], h, w)  # (B, Ps, 2)
        diff = ((fx - f0) ** 2).sum(-1) + ((fy - f0) ** 2).sum(-1)  # (B, Ps)
        smooth = (diff * weight[:, :n_s]).mean()
    else:
        smooth = phi.new_zeros(())

    # Weighting the masks makes every E_u in the centre loss importance-weighted as well.
    center = center_loss(pm.masks[:, :, :p] * weight[:, None], pm.v[:, :, :p], pose[..., 3],
                         cfg.center_form)
    total = (render + cfg.w_smooth * smooth + center_scale * cfg.w_center * center
             + cfg.w_appearance * appearance + cfg.w_segment * segment
             + overlap_gain * cfg.w_overlap * overlap)
    return LossTerms(total=total, render=render, smooth=smooth, center=center,
                     appearance=appearance, overlap=overlap, consistency=phi.new_zeros(()))


def render_loss(pyr_src: list[torch.Tensor], pyr_dst: list[torch.Tensor], idx: torch.Tensor,
                u: torch.Tensor, phi: torch.Tensor, weight: torch.Tensor,
                levels: list | None = None) -> torch.Tensor:
    """|| dst(u + Phi(u)) - src(u) ||^2 at the points, weighted, averaged over the pyramid.

    pyr_*: blurred copies (B, 3, H, W); idx (B, P) the points' pixel indices, u (B, P, 2) their
    coordinates, phi (B, P, 2) the flow there, weight (B, P); levels: each copy's weight in the
    average (floats or scalar tensors, not all zero), None = equal.
    """
    levels = [1.0] * len(pyr_src) if levels is None else levels
    render = phi.new_zeros(())
    for src, dst, level in zip(pyr_src, pyr_dst, levels):
        target = geometry.gather_pixels(src, idx).float()  # (B, 3, P)
        pred = geometry.sample_at(dst, u + phi).float()  # (B, 3, P)
        render = render + level * (((pred - target) ** 2).sum(1) * weight).mean()
    return render / sum(levels)


def segment_loss(seg: torch.Tensor, v: torch.Tensor, pose_next: torch.Tensor, u: torch.Tensor,
                 pyr_src: list[torch.Tensor], pyr_dst: list[torch.Tensor], idx: torch.Tensor,
                 weight: torch.Tensor, w_appearance: float) -> torch.Tensor:
    """The render (and appearance) loss of the coarse ownership in place of the visibility.

    seg (B, K, h, w); v (B, K, P, 2) the points in each capsule's frame; pose_next (B, K, 4).
    Every capsule owns a softmax share of every cell, so each one gets a gradient wherever the
    image is badly explained, unlike a decoder mask far from an unexplained shape (whose
    capsule gets no gradient there and never moves to it).
    """
    own = geometry.sample_at(seg, u).float()  # (B, K, P)
    phi = (own[..., None] * geometry.capsule_flow(v, pose_next, u)).sum(1)  # (B, P, 2)
    render = render_loss(pyr_src, pyr_dst, idx, u, phi, weight)
    if w_appearance > 0:
        render = render + w_appearance * appearance_loss(
            own, geometry.gather_pixels(pyr_src[0], idx).float(), weight)
    return render


@torch.no_grad()
def occlusion_keep(model: FlowCapsules, vis: torch.Tensor, caps_next: tuple,
                   dest: torch.Tensor) -> torch.Tensor:
    """The probability that a point's owner in src is still the visible layer at its destination.

    vis (B, K, P): src visibility; dest (B, P, 2): u + Phi(u) in dst's frame -> (B, P).
    A background pixel that a moving shape covers in dst has no correct match there: the plain
    render loss rewards lending it the shape's flow (so masks grow along the motion). Weighting
    each point by sum_k vis_k(u) vis'_k(u + Phi) plus the same for the background removes that
    reward. Detached, so declaring a point occluded earns nothing.
    """
    shape, pose, depth = (x.detach() for x in caps_next)
    vd = model.masks_at(shape, pose, depth, dest.detach()).visible  # (B, K, P)
    vs = vis.detach()
    return (vs * vd).sum(1) + (1 - vs.sum(1)) * (1 - vd.sum(1))  # (B, P)


def overlap_loss(masks: torch.Tensor, v: torch.Tensor, pose_next: torch.Tensor, u: torch.Tensor,
                 weight: torch.Tensor, tau: float, size: tuple[int, int]) -> torch.Tensor:
    """E_u[sum_{j != k} g_jk(u) Lambda_j(u) Lambda_k(u)]: two capsules covering the same moving pixels.

    masks (B, K, P) amodal; v (B, K, P, 2) the points in each capsule's frame; pose_next (B, K, 4);
    u (B, P, 2); weight (B, P) importance weights; tau in pixels; size (H, W).
    Nothing in the paper's loss stops a second capsule from sitting on a shape that one already
    explains: the flows are equal, so the render loss cannot tell. Such duplicates take a class
    from one capsule in some images and from the other in the rest. The gate
    g_jk = exp(-|f_j - f_k|^2 / tau^2) of the two capsules' flows there (detached) limits the
    penalty to capsules that move together, so two shapes that overlap while moving apart keep
    their amodal masks.
    """
    with torch.no_grad():
        flow = geometry.frame_to_pixels(geometry.capsule_flow(v, pose_next, u), *size)  # (B, K, P, 2)
        d2 = ((flow[:, :, None] - flow[:, None]) ** 2).sum(-1)  # (B, K, K, P)
        k = masks.shape[1]
        gate = torch.exp(-d2 / tau ** 2) * (1 - torch.eye(k, device=masks.device))[..., None]  # (B, K, K, P)
    pairs = torch.einsum("bjp,bjkp,bkp->bp", masks, gate.to(masks.dtype), masks)  # (B, P)
    return (pairs * weight).mean()


def consistency_loss(model: FlowCapsules, shape: torch.Tensor, side: int = 8,
                     extent: float = 1.2) -> torch.Tensor:
    """Each capsule's canonical mask varies across the batch: mean_k,v Var_b sigmoid(D(v; s_bk)).

    shape (B, K, C-5); the masks are read on a fixed side x side grid over [-extent, extent]^2
    of the canonical frame. The loss is blind to which capsule explains which shape, so nothing
    keeps a capsule on one kind of shape: in short runs a class went to different capsules in
    different images. Geo's shapes never deform (pose carries position, angle and size), so a
    capsule whose canonical mask stays the same across images is one that keeps to one class.
    Read on probabilities, so rescaling the shape codes cannot shrink it.
    """
    b, k, _ = shape.shape
    t = torch.linspace(-extent, extent, side, device=shape.device)
    v = torch.stack(torch.meshgrid(t, t, indexing="xy"), -1).reshape(1, 1, -1, 2)  # (1, 1, G, 2)
    masks = torch.sigmoid(model.decoder(shape, v.expand(b, k, -1, -1).to(shape.dtype)).float())  # (B, K, G)
    return masks.var(0, unbiased=False).mean()


def appearance_loss(vis: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Each visible layer explains its pixels with one colour: a dense signal for the masks.

    vis (B, K, P) capsule visibility (the background takes the rest), target (B, 3, P) the src
    pixels, weight (B, P) importance weights. Each layer's colour is its visibility-weighted mean
    (closed form); the loss is the squared error of the layered flat-colour image. The flow loss
    only sees edges of flat shapes; this one also constrains their interiors.
    """
    layers = torch.cat([vis, (1 - vis.sum(1, keepdim=True)).clamp_min(0)], 1)  # (B, K+1, P)
    wl = layers * weight[:, None]  # (B, K+1, P)
    colour = torch.einsum("bkp,bcp->bkc", wl, target) / wl.sum(2)[..., None].clamp_min(1e-6)  # (B, K+1, 3)
    recon = torch.einsum("bkp,bkc->bcp", layers, colour)  # (B, 3, P)
    return (((recon - target) ** 2).sum(1) * weight).mean()


def center_loss(masks: torch.Tensor, v: torch.Tensor, scale: torch.Tensor, form: str) -> torch.Tensor:
    """masks (B, K, P), v (B, K, P, 2), scale (B, K) -> scalar, averaged over B and K."""
    if form == "spread":
        return (masks * (v ** 2).sum(-1)).mean(2).mean()  # E_u over the points, then B, K
    if form == "spread_image":
        d2 = (v ** 2).sum(-1) * scale[..., None] ** 2  # (B, K, P) = |u - t|^2
        return (masks * d2).mean(2).mean()
    mass = masks.mean(2)  # (B, K) = E_u[Lambda]
    centroid = (masks[..., None] * v).mean(2) / (mass[..., None] + 1e-4)  # (B, K, 2)
    return (centroid ** 2).sum(-1).mean()


def shuffle_channels(images: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """images (N, 3, H, W) with each image's channels in its own random order (TrainConfig.colour_shuffle)."""
    n, c, h, w = images.shape
    order = torch.rand(n, c, generator=gen, device=_gen_device(gen)).argsort(1).to(images.device)  # (N, 3)
    return images.gather(1, order[:, :, None, None].expand(-1, -1, h, w))  # (N, 3, H, W)


def pair_loss(model: FlowCapsules, img0: torch.Tensor, img1: torch.Tensor, cfg: TrainConfig,
              gen: torch.Generator | None, center_scale: float | torch.Tensor = 1.0,
              blur_gain: float | torch.Tensor = 1.0,
              overlap_gain: float | torch.Tensor = 1.0) -> LossTerms:
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
        *caps, seg = model.encode_with_segment(both)
    c0 = tuple(x[:b] for x in caps)
    c1 = tuple(x[b:] for x in caps)
    s0, s1 = (None, None) if seg is None else (seg[:b].float(), seg[b:].float())
    pyr0 = [geometry.gaussian_blur(img0, s) for s in cfg.blur_sigmas]
    pyr1 = [geometry.gaussian_blur(img1, s) for s in cfg.blur_sigmas]
    density = edge_density(img0, img1, cfg.edge_sigma) if cfg.edge_sampling > 0 else None
    idx, wt = sample_indices(b, h, w, cfg.points, gen, img0.device, density, cfg.edge_sampling)
    with ctx:
        terms = [direction_loss(model, c0, c1, pyr0, pyr1, idx, cfg, center_scale, wt, s0,
                                blur_gain, overlap_gain)]
        if cfg.both_directions:
            idx1, wt1 = sample_indices(b, h, w, cfg.points, gen, img0.device, density,
                                       cfg.edge_sampling)
            terms.append(direction_loss(model, c1, c0, pyr1, pyr0, idx1, cfg, center_scale, wt1, s1,
                                         blur_gain, overlap_gain))
        consistency = (consistency_loss(model, caps[0]) if cfg.w_consistency > 0
                       else img0.new_zeros(()))
    n = len(terms)
    # Every term but the consistency (taken once per pair) is averaged over the directions.
    out = {f.name: sum(getattr(t, f.name) for t in terms) / n
           for f in fields(LossTerms) if f.name != "consistency"}
    # Ramped in with the centre loss: the capsules first have to find shapes at all.
    out["total"] = out["total"] + center_scale * cfg.w_consistency * consistency
    return LossTerms(**out, consistency=consistency)
