"""Part capsule autoencoder (SCAE, Sec. 2.2): parts from an image, the image from parts.

Letters: B batch, M part capsules, F special features, T template side, S texture grid side,
H = W image side, P encoder positions (h' w').

Encoder: a conv net, then attention pooling: for each part a 1x1 conv gives a value vector
and a logit at every position; the softmax of the logits over positions weights the values.
Each part has a pose (6 numbers through `geometry.geometric_transform`), a presence and F
special features. Decoder: M learned templates (an intensity and an alpha map each), coloured
(Geo) or textured (Geo+) from the special features, placed by their poses. Image likelihood:
each pixel is a mixture of the M placed templates and a background colour (one per image,
from the encoder); a part's mixing weight is presence_m * alpha_m(u), the background's a
learned constant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from baselines.scae import geometry
from baselines.scae.config import PCAEConfig

LOG_2PI = math.log(2 * math.pi)


@dataclass
class Parts:
    """What the encoder says about an image."""

    pose: torch.Tensor  # (B, M, 2, 3) template -> image affine
    presence: torch.Tensor  # (B, M) in (0, 1)
    features: torch.Tensor  # (B, M, F) special features
    background: torch.Tensor  # (B, 3) background colour in (0, 1)


@dataclass
class Rendered:
    """Templates placed in the image."""

    colour: torch.Tensor  # (B, M, 3, H, W) template colours
    alpha: torch.Tensor  # (B, M, H, W) template alphas in [0, 1], 0 outside a template


def orthogonal_init(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Templates mutually orthogonal at the start, scaled to [0, 1] (SCAE's initialiser)."""
    elems = size * size
    k = max(n, elems)
    q = np.linalg.qr(rng.uniform(size=(k, k)))[0][:n, :elems]  # (n, T*T)
    q = (q - q.min()) / (q.max() - q.min())
    return q.reshape(n, 1, size, size).astype(np.float32)


class PartEncoder(nn.Module):
    def __init__(self, cfg: PCAEConfig):
        super().__init__()
        self.cfg = cfg
        layers, ch = [], 3
        for out, stride in zip(cfg.enc_channels, cfg.enc_strides):
            layers += [nn.Conv2d(ch, out, 3, stride), nn.ReLU()]  # "VALID" padding, as SCAE
            ch = out
        self.convs = nn.Sequential(*layers)
        side = cfg.image_size
        for stride in cfg.enc_strides:
            side = (side - 3) // stride + 1
        self.split = (6, cfg.n_special, 1)  # pose, special features, presence logit
        # a learned bias per position and channel: the attention's only sense of where it is
        self.pos_bias = nn.Parameter(torch.zeros(ch, side, side))
        self.head = nn.Conv2d(ch, cfg.n_parts * (sum(self.split) + 1), 1)
        with torch.no_grad():  # the scales start at init_scale: sigmoid(bias) + 0.01
            bias = self.head.bias[:cfg.n_parts * sum(self.split)].view(cfg.n_parts, -1)
            bias[:, :2] = math.log((cfg.init_scale - 0.01) / (1.01 - cfg.init_scale))
        self.bg = nn.Linear(ch, 3)  # a background colour per image

    def forward(self, images: torch.Tensor, gen: torch.Generator | None = None) -> Parts:
        """images (B, 3, H, W) in [0, 1]; `gen` draws the presence noise (training only)."""
        m, d = self.cfg.n_parts, sum(self.split)
        emb = self.convs(images)  # (B, C, h', w')
        b = emb.shape[0]
        h = self.head(emb + self.pos_bias).flatten(2)  # (B, M*(d+1), P)
        values = h[:, :m * d].view(b, m, d, -1)  # (B, M, d, P)
        attn = torch.softmax(h[:, m * d:], -1)  # (B, M, P), over positions
        pooled = (values * attn[:, :, None]).sum(-1)  # (B, M, d)
        raw_pose, feats, logit = pooled.split(self.split, -1)
        logit = logit.squeeze(-1)  # (B, M)
        if gen is not None and self.cfg.presence_noise > 0:
            u = torch.rand(logit.shape, generator=gen, device=logit.device)
            logit = logit + (u - 0.5) * self.cfg.presence_noise
        bg = torch.sigmoid(self.bg(emb.mean((2, 3))))  # (B, 3)
        return Parts(pose=geometry.geometric_transform(raw_pose), presence=torch.sigmoid(logit),
                     features=feats, background=bg)


class TemplateDecoder(nn.Module):
    def __init__(self, cfg: PCAEConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        rng = np.random.default_rng(seed)
        self.intensity_logits = nn.Parameter(torch.from_numpy(
            orthogonal_init(cfg.n_parts, cfg.template_size, rng)))  # (M, 1, T, T)
        self.alpha_logits = nn.Parameter(torch.zeros(cfg.n_parts, 1, cfg.template_size,
                                                     cfg.template_size))  # (M, 1, T, T)
        n_colour = 3 if cfg.templates == "coloured" else 3 * cfg.texture_size ** 2
        self.colour = nn.Sequential(nn.Linear(cfg.n_special, 32), nn.ReLU(),
                                    nn.Linear(32, n_colour))
        self.bg_logit = nn.Parameter(torch.tensor(float(cfg.bg_logit)))  # background's mixing logit

    def alphas(self) -> torch.Tensor:
        return torch.sigmoid(self.alpha_logits)  # (M, 1, T, T)

    def templates(self, features: torch.Tensor) -> torch.Tensor:
        """Colour templates (B, M, 3, T, T): intensity times a colour (or texture) per part."""
        b, m = features.shape[:2]
        t = self.cfg.template_size
        colour = torch.sigmoid(self.colour(features))  # (B, M, 3 or 3*S*S)
        if self.cfg.templates == "coloured":
            colour = colour[..., None, None]  # (B, M, 3, 1, 1)
        else:
            s = self.cfg.texture_size
            grid = colour.view(b * m, 3, s, s)  # (B*M, 3, S, S)
            colour = F.interpolate(grid, size=(t, t), mode="bilinear",
                                   align_corners=False).view(b, m, 3, t, t)
        return torch.sigmoid(self.intensity_logits)[None] * colour  # (B, M, 3, T, T)

    def render(self, parts: Parts) -> Rendered:
        b, m = parts.presence.shape
        t, size = self.cfg.template_size, self.cfg.image_size
        colour = self.templates(parts.features)  # (B, M, 3, T, T)
        alpha = self.alphas()[None].expand(b, -1, -1, -1, -1)  # (B, M, 1, T, T)
        stack = torch.cat([colour, alpha], 2).reshape(b * m, 4, t, t)
        placed = geometry.render(stack, parts.pose.reshape(b * m, 2, 3), size)  # (B*M, 4, H, W)
        placed = placed.view(b, m, 4, size, size)
        return Rendered(colour=placed[:, :, :3], alpha=placed[:, :, 3].clamp(0, 1))


def mixture_log_terms(image: torch.Tensor, rendered: Rendered, presence: torch.Tensor,
                      background: torch.Tensor, bg_logit: torch.Tensor,
                      std: float) -> torch.Tensor:
    """log pi_m(u) + log N(x(u) | mu_m(u), std^2 I) for the M parts and the background.

    image (B, 3, H, W); returns (B, M+1, H, W), the background last. pi is normalised over
    the M+1 components at every pixel; N is over the 3 colour channels jointly.
    """
    b, m = presence.shape
    weight = presence[:, :, None, None] * rendered.alpha  # (B, M, H, W)
    # log 0 = -inf outside a template (exactly: a floor would let a template explain far pixels
    # whose colour it matches); the clamp only keeps the gradient finite there
    log_part = torch.where(weight > 0, torch.log(weight.clamp_min(1e-30)), -math.inf)
    log_w = torch.cat([log_part, bg_logit.expand(b, 1, *weight.shape[2:])], 1)  # (B, M+1, H, W)
    log_w = torch.log_softmax(log_w, 1)
    means = torch.cat([rendered.colour, background[:, None, :, None, None].expand(
        b, 1, 3, *weight.shape[2:])], 1)  # (B, M+1, 3, H, W)
    sq = ((image[:, None] - means) / std).pow(2).sum(2)  # (B, M+1, H, W)
    log_n = -0.5 * sq - 3 * (math.log(std) + 0.5 * LOG_2PI)
    return log_w + log_n  # (B, M+1, H, W)


def image_log_likelihood(joint: torch.Tensor) -> torch.Tensor:
    """Sum over pixels of log sum_m pi_m N_m, one number per image: (B,)."""
    return torch.logsumexp(joint, 1).sum((1, 2))


def responsibilities(joint: torch.Tensor) -> torch.Tensor:
    """Posterior of each component at each pixel, (B, M+1, H, W), background last."""
    return torch.softmax(joint, 1)


def mixture_mean(rendered: Rendered, presence: torch.Tensor, background: torch.Tensor,
                 bg_logit: torch.Tensor) -> torch.Tensor:
    """The reconstruction sum_m pi_m mu_m (B, 3, H, W), for figures."""
    b = presence.shape[0]
    weight = presence[:, :, None, None] * rendered.alpha  # (B, M, H, W)
    w = torch.cat([weight, bg_logit.exp().expand(b, 1, *weight.shape[2:])], 1)
    w = w / w.sum(1, keepdim=True)  # (B, M+1, H, W)
    fg = (w[:, :-1, None] * rendered.colour).sum(1)  # (B, 3, H, W)
    return fg + w[:, -1:] * background[:, :, None, None]
