"""R-NEM (van Steenkiste et al., ICLR 2018) for colour frames: K groups, EM over a clip.

Letters: B batch, K groups, C = 3 colour channels, H = W = the model's work side, D state size,
M encoder features, R relational hidden size, S EM steps.

Each group k holds a recurrent state theta_k and predicts a full image mu_k = decoder(theta_k).
One EM step (paper, Sec. 2; official code's NEMCell):
  M-step  the input of group k is its share of the prediction error, gamma_k * (x - mu_k), the
          gradient of the Gaussian log-likelihood with respect to mu_k up to 1 / sigma^2; the
          encoder embeds it and the relational cell updates theta_k from it and from the other
          groups' states; the decoder gives the new mu_k.
  E-step  gamma_k = P(pixel belongs to k) = N(x; mu_k, sigma) / sum_j N(x; mu_j, sigma) per
          pixel, the channels independent given k, against the step's target frame.
Over a clip the target of a step is the next step's input (R-NEM predicts the next frame);
`schedule` shows frame 0 `warmup` extra times against itself, then each frame `em_steps` times
(R-NEM: once), so a frame gets E - 1 iterations against itself before the step that predicts
the next frame. The decoder draws each group through a mask m_k over the prior,
mu_k = m_k c_k + (1 - m_k) prior, with one colour c_k per group or a colour at every pixel
(`colour`; docs/baselines/rnem.md says why; the official decoder draws a free image). With
`background_group` the prior is also a fixed (K+1)-th component of the E-step.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from baselines.rnem.config import ModelConfig


class State(NamedTuple):
    """What one EM step hands to the next."""

    theta: torch.Tensor  # (B, K, D) recurrent states
    mu: torch.Tensor  # (B, K, C, H, W) predicted means in [0, 1]
    mask: torch.Tensor  # (B, K, 1, H, W) the decoder's mask m_k: where group k draws its colour
    # (B, K, 1, H, W) responsibilities, summing to 1 over K (to 1 minus the background
    # group's with `background_group`)
    gamma: torch.Tensor
    prior: torch.Tensor  # (B, 1, C, 1, 1) the pixel prior's mean, fixed over the clip


def schedule(frames: int, em_steps: int, warmup: int = 0) -> list[tuple[int, int]]:
    """(input frame, target frame) of every step: frame 0 shown `warmup` extra times, then
    each frame `em_steps` times, each step's target the next step's input. frames=2,
    em_steps=3 gives (0, 0), (0, 0), (0, 1), (1, 1), (1, 1); frames=3, em_steps=1, warmup=2
    (R-NEM's one step per frame after a warm-up) gives (0, 0), (0, 0), (0, 1), (1, 2)."""
    seq = [0] * warmup + [t for t in range(frames) for _ in range(em_steps)]
    return list(zip(seq[:-1], seq[1:]))


def read_step(cfg: ModelConfig) -> int:
    """The step after which frame 0 is read: its last step against itself, so what is read
    depends on frame 0 alone."""
    return cfg.warmup + cfg.em_steps - 2


def e_step(mu: torch.Tensor, x: torch.Tensor, sigma: float, epsilon: float = 0.0
           ) -> torch.Tensor:
    """Responsibilities of K Gaussian components with fixed sigma for every pixel.

    Args:
        mu: (B, K, C, H, W) component means.
        x: (B, C, H, W) the target frame.
        epsilon: added to every component's density before normalising (the official
            code's 1e-6 "to prevent 0 gamma"): where no group's density reaches it, the
            pixel is shared by all groups instead of going to the least wrong one.
    Returns:
        (B, K, 1, H, W) gamma = (p_k + epsilon) / sum_j (p_j + epsilon), with
        p_k = prod_c N(x_c; mu_kc, sigma^2).
    """
    sq = ((x[:, None] - mu) ** 2).sum(2, keepdim=True)  # (B, K, 1, H, W)
    loglik = -sq / (2 * sigma ** 2)
    if epsilon > 0:  # the normaliser no longer cancels: it sets where epsilon takes over
        c = mu.shape[2]
        loglik = torch.logaddexp(loglik - c * math.log(sigma * math.sqrt(2 * math.pi)),
                                 torch.full_like(loglik, math.log(epsilon)))
    return torch.softmax(loglik, dim=1)


def pixel_prior(cfg: ModelConfig, clip: torch.Tensor) -> torch.Tensor:
    """The pixel prior's mean for each clip (B, T, C, H, W): (B, 1, C, 1, 1)."""
    b, c = clip.shape[0], clip.shape[2]
    if cfg.prior == "median":  # the background: Geo's shapes cover a few per cent of a frame
        return clip[:, 0].flatten(2).median(-1).values.view(b, 1, c, 1, 1)
    return clip.new_full((b, 1, c, 1, 1), cfg.prior_mean)


def _ln_act(n: int, act: nn.Module) -> list[nn.Module]:
    return [nn.LayerNorm(n), act]


class Encoder(nn.Module):
    """Masked prediction error (N, C, H, W) -> (N, M): strided convs, then one FC layer, each
    followed by layer norm (over the whole feature map, as slim's layer_norm) and ELU."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        layers: list[nn.Module] = []
        c, side = 3, cfg.work_size
        for out in cfg.enc_channels:
            layers += [nn.Conv2d(c, out, 4, stride=2, padding=1), nn.GroupNorm(1, out), nn.ELU()]
            c, side = out, side // 2
        layers += [nn.Flatten(), nn.Linear(c * side * side, cfg.enc_hidden),
                   *_ln_act(cfg.enc_hidden, nn.ELU())]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Decoder(nn.Module):
    """theta (N, D) -> mu (N, C, H, W) in [0, 1] and the mask m (N, 1, H, W).

    The mask: two FC layers, then one 4x4 transposed conv of stride 2 per encoder layer, layer
    norm and ReLU between them, a sigmoid at the end (the official code upsamples by nearest
    neighbour and then convolves; a transposed conv of the same kernel doubles the side at a
    quarter of the cost). The colour: a linear map of theta and a sigmoid (`colour` "group"),
    or three more channels of the last layer and a sigmoid ("pixel"); "image" is the
    official's output, the last layer's three channels through a sigmoid, with no mask.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        c = cfg.enc_channels[-1]
        self.side, self.c = cfg.work_size // 2 ** len(cfg.enc_channels), c
        self.fc = nn.Sequential(nn.Linear(cfg.state_size, cfg.dec_hidden),
                                *_ln_act(cfg.dec_hidden, nn.ReLU()),
                                nn.Linear(cfg.dec_hidden, c * self.side ** 2),
                                *_ln_act(c * self.side ** 2, nn.ReLU()))
        self.kind = cfg.colour
        last = {"group": 1, "pixel": 4, "image": 3}[cfg.colour]  # mask, mask and RGB, RGB
        outs = list(reversed(cfg.enc_channels[:-1])) + [last]
        layers: list[nn.Module] = []
        for i, out in enumerate(outs):
            layers.append(nn.ConvTranspose2d(c, out, 4, stride=2, padding=1))
            if i < len(outs) - 1:
                layers += [nn.GroupNorm(1, out), nn.ReLU()]
            c = out
        self.conv = nn.Sequential(*layers)
        self.colour = nn.Linear(cfg.state_size, 3) if cfg.colour == "group" else None
        self.mask_init = cfg.mask_init

    def reset_mask_bias(self) -> None:
        """Start every mask near `mask_init`, so the first predictions sit near the prior."""
        m = self.mask_init
        if self.kind != "image":  # the official output keeps its zero bias
            nn.init.constant_(self.conv[-1].bias[:1], math.log(m / (1 - m)))

    def forward(self, theta: torch.Tensor, prior: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """theta (N, D), prior (N, C, 1, 1) -> mu (N, C, H, W), mask (N, 1, H, W)."""
        h = self.fc(theta).view(-1, self.c, self.side, self.side)  # (N, c, h, w)
        out = self.conv(h)  # (N, 1 or 1 + C or C, H, W)
        if self.kind == "image":  # no mask: where it departs from the prior stands in for one
            mu = torch.sigmoid(out)  # (N, C, H, W)
            return mu, (mu - prior).abs().amax(1, keepdim=True)
        mask = torch.sigmoid(out[:, :1])  # (N, 1, H, W)
        if self.colour is None:
            colour = torch.sigmoid(out[:, 1:])  # (N, C, H, W)
        else:
            colour = torch.sigmoid(self.colour(theta))[:, :, None, None]  # (N, C, 1, 1)
        return mask * colour + (1 - mask) * prior, mask


class RelationalCell(nn.Module):
    """R-NEM's recurrent update, equivariant to permutations of the K groups.

    h_k = enc(theta_k); for every ordered pair (k, j), j != k: e_kj = core([h_k, h_j]),
    effect_k = sum_j context(e_kj) * attention(e_kj); theta_k' = sigmoid(LN(W [h_k, effect_k,
    x_k])) with x_k the group's encoded input. All pairs are computed at once and the diagonal
    (k, k) is masked out of the sum.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        r = cfg.rel_hidden
        self.enc = nn.Sequential(nn.Linear(cfg.state_size, r), *_ln_act(r, nn.ReLU()))
        self.core = nn.Sequential(nn.Linear(2 * r, r), *_ln_act(r, nn.ReLU()))
        self.context = nn.Sequential(nn.Linear(r, r), *_ln_act(r, nn.ReLU()))
        self.attention = nn.Sequential(nn.Linear(r, cfg.att_hidden),
                                       *_ln_act(cfg.att_hidden, nn.Tanh()),
                                       nn.Linear(cfg.att_hidden, 1), nn.Sigmoid())
        self.update = nn.Linear(2 * r + cfg.enc_hidden, cfg.state_size)
        self.norm = nn.LayerNorm(cfg.state_size)

    def forward(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """x: (B, K, M) encoded inputs; theta: (B, K, D) -> new theta (B, K, D)."""
        b, k, _ = theta.shape
        h = self.enc(theta)  # (B, K, R)
        focus = h[:, :, None].expand(b, k, k, h.shape[-1])  # (B, K, K, R): row k is h_k
        other = h[:, None].expand(b, k, k, h.shape[-1])  # (B, K, K, R): column j is h_j
        core = self.core(torch.cat([focus, other], -1))  # (B, K, K, R)
        off_diag = 1.0 - torch.eye(k, device=theta.device, dtype=theta.dtype)  # (K, K)
        weight = self.attention(core) * off_diag[None, :, :, None]  # (B, K, K, 1)
        effect = (self.context(core) * weight).sum(2)  # (B, K, R)
        return torch.sigmoid(self.norm(self.update(torch.cat([h, effect, x], -1))))  # (B, K, D)


def init_like_official(model: nn.Module) -> None:
    """The official code's initialisation (TF slim's defaults): Glorot-uniform weights and zero
    biases in every linear and convolutional layer; layer norms start at gain 1, bias 0.
    PyTorch's default (a narrower uniform and random biases) shrinks what tells the groups
    apart: a common random offset in every layer, so the EM loop contracts faster."""
    for mod in model.modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.xavier_uniform_(mod.weight)
            nn.init.zeros_(mod.bias)


class RNEM(nn.Module):
    """The R-NEM network; `step` is one EM iteration, batched over samples and groups."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.cell = RelationalCell(cfg)
        self.decoder = Decoder(cfg)
        init_like_official(self)
        self.decoder.reset_mask_bias()

    def to_work(self, images: torch.Tensor) -> torch.Tensor:
        """(..., C, image_size, image_size) in [0, 1] -> (..., C, H, W) at the work side."""
        f = self.config.image_size // self.config.work_size
        if f == 1:
            return images
        lead = images.shape[:-3]
        x = F.avg_pool2d(images.reshape(-1, *images.shape[-3:]), f)  # (N, C, H, W)
        return x.view(*lead, *x.shape[1:])

    def init_state(self, prior: torch.Tensor, gen: torch.Generator, shared: bool = False
                   ) -> State:
        """The official start for a batch of priors (B, 1, C, 1, 1) (`pixel_prior`): theta = 0,
        mu = the prior, gamma = |N(0, 1)| normalised over K;
        gamma is drawn on an `init_grid` x `init_grid` grid and resized (smooth blobs), or per
        pixel (the official code) when init_grid is 0. `shared` draws once for the whole batch
        (inference: an image's result then does not depend on its batch)."""
        cfg, dev, batch = self.config, next(self.parameters()).device, prior.shape[0]
        k, side = cfg.num_groups, cfg.work_size
        n = k + int(cfg.background_group)  # the background group's share is drawn too
        theta = torch.zeros(batch, k, cfg.state_size, device=dev)  # (B, K, D)
        mu = prior.to(dev).expand(batch, k, 3, side, side).contiguous()  # (B, K, C, H, W)
        grid = cfg.init_grid or side
        g = torch.randn(1 if shared else batch, n, grid, grid, generator=gen,
                        device=gen.device).abs().to(dev)
        g = (g / g.sum(1, keepdim=True))[:, n - k:]  # (B or 1, K, grid, grid)
        if grid != side:  # bilinear weights keep the sum over K at 1
            g = F.interpolate(g, size=(side, side), mode="bilinear", align_corners=False)
        g = g[:, :, None].expand(batch, -1, -1, -1, -1)  # (B, K, 1, H, W)
        return State(theta, mu, torch.zeros_like(g), g, prior.to(dev))

    def step(self, state: State, x_in: torch.Tensor, target: torch.Tensor) -> State:
        """One EM iteration. x_in: (B, C, H, W) the (corrupted) input frame; target: (B, C, H, W)
        the frame the new predictions are scored against (E-step)."""
        b, k = state.mu.shape[:2]
        # R-NEM stops the gradient through gamma: it is an E-step result, not a function to learn.
        delta = (x_in[:, None] - state.mu) * state.gamma.detach()  # (B, K, C, H, W)
        x = self.encoder(delta.flatten(0, 1)).view(b, k, -1)  # (B, K, M)
        theta = self.cell(x, state.theta)  # (B, K, D)
        prior = state.prior.expand(b, k, -1, -1, -1).flatten(0, 1)  # (B * K, C, 1, 1)
        mu, mask = self.decoder(theta.flatten(0, 1), prior)  # (B * K, C, H, W), (B * K, 1, H, W)
        mu, mask = mu.view(state.mu.shape), mask.view(state.gamma.shape)
        comps = mu  # (B, K or K + 1, C, H, W): the E-step's components
        if self.config.background_group:  # component 0: the prior, never learned
            comps = torch.cat([state.prior.expand(b, 1, *mu.shape[2:]), mu], 1)
        gamma = e_step(comps, target, self.config.sigma, self.config.e_epsilon)
        return State(theta, mu, mask, gamma[:, comps.shape[1] - k:], state.prior)

    def run(self, clip: torch.Tensor, gen: torch.Generator, inputs: torch.Tensor | None = None,
            shared_init: bool = False) -> list[State]:
        """Every step's state over a clip (B, T, C, H, W) at the work side, following
        `schedule(T, em_steps)`; `inputs` (same shape) replaces the clip as the input (the
        corrupted frames in training) while the targets stay `clip`."""
        inputs = clip if inputs is None else inputs
        state = self.init_state(pixel_prior(self.config, clip), gen, shared_init)
        states = []
        for t_in, t_out in schedule(clip.shape[1], self.config.em_steps, self.config.warmup):
            state = self.step(state, inputs[:, t_in], clip[:, t_out])
            states.append(state)
        return states

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.load_state_dict(weights, strict=True)

