"""The FlowCapsules network (paper Sec. 3-4): encoder -> capsules -> implicit masks -> flow.

Letters: B batch, K capsules, C capsule size, P points, H, W image side, Hd decoder width.
A capsule c_k = (s_k, theta_k, d_k): shape code (C - 5), pose (tx, ty, a, s) and depth (larger
is nearer). Pose conventions are in `flowcaps.geometry`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from flowcaps import geometry
from flowcaps.config import ModelConfig
from flowcaps.errors import FlowcapsError
from flowcaps.inputs import as_images


@dataclass
class Capsules:
    """What `FlowCapsules.parse` returns. pose is (tx, ty, angle, scale) in the [-1, 1] frame."""

    shape: torch.Tensor  # (B, K, C-5)
    pose: torch.Tensor  # (B, K, 4)
    depth: torch.Tensor  # (B, K)
    masks: torch.Tensor  # (B, K, H, W) amodal Lambda_k in [0, 1]
    visible: torch.Tensor  # (B, K, H, W) Lambda+_k; sums to 1 over K, or to 1 - background


@dataclass
class PointMasks:
    """Masks evaluated at P points of one frame."""

    v: torch.Tensor  # (B, K, P, 2) canonical coordinates
    masks: torch.Tensor  # (B, K, P) Lambda_k
    visible: torch.Tensor  # (B, K, P) Lambda+_k


class Encoder(nn.Module):
    """Conv (+ GroupNorm past the first, `enc_norm`) + ReLU with 2x2 average pooling between, a
    tanh FC, then K*C capsule numbers."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        c_in = 3 + (2 if cfg.coord_channels else 0)
        self.convs = nn.ModuleList()
        for c_out in cfg.enc_channels:
            self.convs.append(nn.Conv2d(c_in, c_out, 3, padding=1))
            c_in = c_out
        # Identity where off (no weights, so checkpoints without enc_norm keep their keys)
        self.norms = nn.ModuleList([nn.Identity()] + [
            nn.GroupNorm(cfg.enc_norm, c) if cfg.enc_norm else nn.Identity()
            for c in cfg.enc_channels[1:]])
        # "softargmax" translation head: K heat maps from the last-but-one block (before its
        # pooling), t_k their spatial expectation; detection by local features gives capsules an
        # identity by appearance and learns positions far faster than regressing them through FCs.
        # That block has 16x16 cells at 64 px, each seeing 18 px: about one Geo shape.
        self.heat_block = max(len(cfg.enc_channels) - 2, 0)
        if cfg.translation_head == "softargmax":
            self.heat = nn.Conv2d(cfg.enc_channels[self.heat_block], cfg.num_capsules, 1)
            side_h = cfg.image_size // 2 ** self.heat_block
            cells = geometry.pixel_centres(side_h, side_h)  # (h*w, 2) cell centres, image frame
            self.register_buffer("cells", cells, persistent=False)
            # A learned per-capsule spatial prior on the heat logits, starting as bumps on the
            # init ring: without it every capsule starts at the image centre, and they stay alike.
            ang = torch.arange(cfg.num_capsules) * 2 * math.pi / cfg.num_capsules
            ring = cfg.init_ring * torch.stack([ang.cos(), ang.sin()], -1)  # (K, 2)
            d2 = ((cells[None] - ring[:, None]) ** 2).sum(-1)  # (K, h*w)
            self.heat_prior = nn.Parameter(-d2 / (2 * 0.3 ** 2))
            # The prior's gain; the trainer can fade it out (TrainConfig.prior_anneal), after
            # which capsules are told apart by what they detect, not by where they started.
            self.register_buffer("prior_gain", torch.ones(()))
            if cfg.pooled_params:
                c_heat = cfg.enc_channels[self.heat_block]
                self.pooled = nn.Sequential(nn.Linear(c_heat, cfg.enc_hidden), nn.ReLU(),
                                            nn.Linear(cfg.enc_hidden, cfg.capsule_dim))
                with torch.no_grad():  # start as a small correction of the FC head's output
                    self.pooled[-1].weight.mul_(0.1)
                    self.pooled[-1].bias.zero_()
        side = cfg.image_size // 2 ** len(cfg.enc_channels)
        self.fc = nn.Linear(c_in * side * side, cfg.enc_hidden)
        self.head = nn.Linear(cfg.enc_hidden, cfg.num_capsules * cfg.capsule_dim)
        if cfg.coord_channels:
            coords = geometry.pixel_centres(cfg.image_size, cfg.image_size)  # (H*W, 2)
            grid = coords.T.reshape(1, 2, cfg.image_size, cfg.image_size)  # (1, 2, H, W)
            self.register_buffer("coords", grid, persistent=False)
        self._init_head()

    def _init_head(self) -> None:
        """Small head weights, and biases that start the K poses on a ring at the shapes' size."""
        cfg = self.cfg
        with torch.no_grad():
            self.head.weight.mul_(0.1)
            bias = self.head.bias.view(cfg.num_capsules, cfg.capsule_dim)
            bias.zero_()
            s0 = cfg.shape_dim
            for k in range(cfg.num_capsules):
                ang = 2 * math.pi * k / cfg.num_capsules
                for j, c in enumerate((math.cos(ang), math.sin(ang))):
                    bias[k, s0 + j] = math.atanh(cfg.init_ring * c / cfg.trans_bound)
            # scale = scale_min + softplus(raw + b), with b placing scale at scale_init for raw = 0
            gap = cfg.scale_init - cfg.scale_min
            bias[:, s0 + 3] = math.log(math.expm1(gap))
            # depth_init after the positivity map of the "static" background (softplus)
            if cfg.background == "static":
                bias[:, s0 + 4] = math.log(math.expm1(cfg.depth_init - cfg.depth_min))
            else:
                bias[:, s0 + 4] = cfg.depth_init

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """images (B, 3, H, W) in [0, 1] -> raw capsules (B, K, C) and the heat maps' t (B, K, 2),
        None with the "fc" head."""
        x = images
        if self.cfg.coord_channels:
            x = torch.cat([x, self.coords.expand(x.shape[0], -1, -1, -1).to(x.dtype)], 1)  # (B, 5, H, W)
        t = local = None
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            x = F.relu(norm(conv(x)))  # (B, c, h, w)
            if i == self.heat_block and self.cfg.translation_head == "softargmax":
                logits = self.heat(x).flatten(2).float() + self.prior_gain * self.heat_prior  # (B, K, h*w)
                attn = torch.softmax(logits, -1)  # (B, K, h*w)
                t = attn @ self.cells  # (B, K, 2)
                if self.cfg.pooled_params:
                    feats = attn.to(x.dtype) @ x.flatten(2).transpose(1, 2)  # (B, K, c)
                    local = self.pooled(feats)  # (B, K, C)
            x = F.avg_pool2d(x, 2)  # (B, c, h/2, w/2)
        h = torch.tanh(self.fc(x.flatten(1)))  # (B, enc_hidden)
        raw = self.head(h).view(-1, self.cfg.num_capsules, self.cfg.capsule_dim)  # (B, K, C)
        if self.cfg.pooled_params:
            raw = raw + local
        return raw, t


class MaskDecoder(nn.Module):
    """D(v; s): SELU MLP over canonical points, its first layer split as W_s s + W_v v.

    The shape code is projected once per capsule (B, K, Hd) and broadcast over the points,
    instead of concatenating s to every point: the same function, P times fewer FLOPs there.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.prior = cfg.mask_prior
        self.in_s = nn.Linear(cfg.shape_dim, cfg.dec_hidden)
        self.in_v = nn.Linear(2, cfg.dec_hidden, bias=False)
        hidden: list[nn.Module] = []
        for _ in range(cfg.dec_depth - 1):
            hidden += [nn.Linear(cfg.dec_hidden, cfg.dec_hidden), nn.SELU()]
        self.hidden = nn.Sequential(*hidden)
        self.out = nn.Linear(cfg.dec_hidden, 1)
        for m in self.modules():  # LeCun-normal init keeps SELU self-normalising
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=1 / math.sqrt(m.in_features))
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        with torch.no_grad():
            self.out.weight.mul_(0.1)

    def forward(self, shape: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """shape (B, K, C-5), v (B, K, P, 2) -> logits (B, K, P)."""
        h = self.in_v(v) + self.in_s(shape)[:, :, None]  # (B, K, P, Hd)
        h = self.hidden(F.selu(h))  # (B, K, P, Hd)
        logit = self.out(h)[..., 0]  # (B, K, P)
        if self.prior:
            # A fixed disc of unit radius in the canonical frame: masks start as blobs the size
            # of the pose's scale; the MLP learns the difference from it.
            logit = logit + self.prior * (1 - (v.float() ** 2).sum(-1)).to(logit.dtype)
        return logit


def composite_over(masks: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """Front-to-back compositing of amodal masks (B, K, P) by depth (B, K) -> visibility (B, K, P).

    Lambda+_k = Lambda_k * prod_{j != k} (1 - f_jk Lambda_j), f_jk = sigmoid(d_j - d_k) the chance
    that capsule j is in front of k (a soft order, so depth gets a gradient). For two capsules
    the visibilities sum to 1 - (1 - Lambda_1)(1 - Lambda_2), their union; with more, a sum over
    1 (possible only while depths are tied) is scaled back to 1. The background takes the rest.
    """
    k = masks.shape[1]
    front = torch.sigmoid(depth[:, :, None] - depth[:, None, :])  # (B, K, K): [j, k] = j before k
    front = front * (1 - torch.eye(k, device=masks.device, dtype=front.dtype))  # (B, K, K)
    cover = front[..., None] * masks[:, :, None]  # (B, K, K, P): [j, k] = what j hides of k
    through = torch.log((1 - cover).clamp_min(1e-6)).sum(1).exp()  # (B, K, P) transmittance
    visible = masks * through  # (B, K, P)
    return visible / visible.sum(1, keepdim=True).clamp_min(1.0)


class FlowCapsules(nn.Module):
    """The model. `parse` and `flow` are the public API; `masks_at` serves the training loss."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        config.validate()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = MaskDecoder(config)
        if config.shape_code == "capsule":
            # One learned shape per capsule: a capsule can only fit the shapes its code draws,
            # which rewards it for sitting on one kind of shape in every image.
            self.shape_embed = nn.Parameter(0.5 * torch.randn(config.num_capsules, config.shape_dim))

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        """`load_state_dict`, accepting checkpoints from before the prior's gain was stored."""
        state = dict(state)
        if hasattr(self.encoder, "prior_gain") and "encoder.prior_gain" not in state:
            state["encoder.prior_gain"] = torch.ones(())
        self.load_state_dict(state)

    def encode(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """images (B, 3, H, W) -> shape (B, K, C-5), pose (B, K, 4), depth (B, K)."""
        cfg = self.config
        raw, t_heat = self.encoder(images)
        raw = raw.float()  # (B, K, C)
        s0 = cfg.shape_dim
        shape = raw[..., :s0]  # (B, K, C-5)
        if t_heat is None:
            t = cfg.trans_bound * torch.tanh(raw[..., s0:s0 + 2])  # (B, K, 2)
        else:
            t = t_heat.float()  # (B, K, 2)
        angle = raw[..., s0 + 2:s0 + 3]  # (B, K, 1)
        scale = cfg.scale_min + F.softplus(raw[..., s0 + 3:s0 + 4])  # (B, K, 1) kept positive
        depth = raw[..., s0 + 4]  # (B, K)
        if cfg.shape_code == "capsule":
            shape = self.shape_embed.expand(raw.shape[0], -1, -1)  # (B, K, C-5)
        if cfg.background == "static":
            # d_k > 0 keeps "Lambda_k > 1/2 claims the pixel" true
            depth = cfg.depth_min + F.softplus(depth)
        return shape, torch.cat([t, angle, scale], -1), depth

    def masks_at(self, shape: torch.Tensor, pose: torch.Tensor, depth: torch.Tensor,
                 u: torch.Tensor) -> PointMasks:
        """Lambda_k(u) = D(P_k^-1 u; s_k) and the depth-ordered Lambda+_k at points u (B, P, 2)."""
        v = geometry.to_canonical(pose, u)  # (B, K, P, 2)
        logit = self.decoder(shape, v).float()  # (B, K, P)
        masks = torch.sigmoid(logit)  # (B, K, P)
        cfg = self.config
        if cfg.layering == "over" and cfg.depth_ordering:
            return PointMasks(v=v, masks=masks, visible=composite_over(masks, depth))
        static = cfg.background == "static"
        level = masks - 0.5 if static else masks
        score = depth[..., None] * level if cfg.depth_ordering else level  # (B, K, P)
        if static:
            # The background entry (score 0, zero flow) takes what no capsule claims.
            bg = torch.zeros_like(score[:, :1])  # (B, 1, P)
            visible = torch.softmax(torch.cat([score, bg], 1), dim=1)[:, :-1]  # (B, K, P)
        else:
            # Where no capsule covers u every score is ~equal, so the weights are uniform there.
            visible = torch.softmax(score, dim=1)  # (B, K, P)
        return PointMasks(v=v, masks=masks, visible=visible)

    @staticmethod
    def flow_at(pm: PointMasks, pose_next: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Phi(u) = sum_k Lambda+_k (T_k(u) - u) in the image frame: (B, P, 2)."""
        per_capsule = geometry.capsule_flow(pm.v, pose_next, u)  # (B, K, P, 2)
        return (pm.visible[..., None] * per_capsule).sum(1)  # (B, P, 2)

    def _grid(self, images: torch.Tensor) -> torch.Tensor:
        b, _, h, w = images.shape
        return geometry.pixel_centres(h, w, images.device).expand(b, -1, -1)  # (B, H*W, 2)

    @torch.no_grad()
    def parse(self, images: torch.Tensor | np.ndarray) -> Capsules:
        """images (B, 3, H, W) float in [0, 1] -> capsules with full-grid masks (inference).

        Also takes uint8 (B, H, W, 3) as geogen stores frames, numpy, or one image (B = 1);
        see `flowcaps.inputs`. Anything else is a FlowcapsError saying what is expected.
        """
        images = as_images(images, self.config.image_size, self.encoder.head.weight.device)
        b, _, h, w = images.shape
        shape, pose, depth = self.encode(images)
        pm = self.masks_at(shape, pose, depth, self._grid(images))
        k = self.config.num_capsules
        return Capsules(shape=shape, pose=pose, depth=depth,
                        masks=pm.masks.view(b, k, h, w), visible=pm.visible.view(b, k, h, w))

    @torch.no_grad()
    def flow(self, img0: torch.Tensor | np.ndarray, img1: torch.Tensor | np.ndarray) -> torch.Tensor:
        """Forward flow img0 -> img1 in pixels, (dx, dy), on img0's grid: (B, 2, H, W) (inference).

        The frames take the forms `parse` takes."""
        device, size = self.encoder.head.weight.device, self.config.image_size
        img0, img1 = as_images(img0, size, device), as_images(img1, size, device)
        if img0.shape != img1.shape:
            raise FlowcapsError(f"img0 and img1 hold different numbers of images "
                                f"({img0.shape[0]} and {img1.shape[0]})")
        b, _, h, w = img0.shape
        shape, pose, depth = self.encode(img0)
        _, pose1, _ = self.encode(img1)
        u = self._grid(img0)  # (B, H*W, 2)
        phi = self.flow_at(self.masks_at(shape, pose, depth, u), pose1, u)  # (B, H*W, 2)
        phi = geometry.frame_to_pixels(phi, h, w)  # (B, H*W, 2)
        return phi.transpose(1, 2).reshape(b, 2, h, w)
