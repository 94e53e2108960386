"""Motion Grouping's network: a conv encoder of the flow with a soft position embedding, Slot
Attention, and a spatial broadcast decoder that gives each slot a flow layer and an alpha
(the official `SlotAttentionAutoEncoder`, written here from its description).

Letters: B batch, K slots, D slot size (the encoder's last width), N = h w encoder positions,
H = W image side, H' = H / work_scale the side the network works at, h = w = H' / 4 encoder
side, g = H' / 8 the broadcast grid's side, 2 flow
components (dx, dy) in pixels outside the network; C the channels of the network's coding of
the flow inside it (`ModelConfig.input_form`): 2 in units of `ModelConfig.unit_pixels` ("uv"),
or 3, the official's colour coding in [-1, 1] ("rgb", `flowcode`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from baselines.motiongrouping.config import UPSAMPLINGS, ModelConfig
from baselines.motiongrouping.flowcode import flow_to_rgb, rgb_to_flow, top_speed


def position_grid(side: int) -> torch.Tensor:
    """(side, side, 4): each cell's (y, x, 1 - y, 1 - x), y and x from 0 to 1 over the grid."""
    r = torch.linspace(0.0, 1.0, side)
    y, x = torch.meshgrid(r, r, indexing="ij")  # (side, side) each
    return torch.stack([y, x, 1 - y, 1 - x], -1)


class SoftPositionEmbed(nn.Module):
    """Adds a learned linear map of the position grid to channels-last features."""

    def __init__(self, channels: int, side: int):
        super().__init__()
        self.proj = nn.Linear(4, channels)
        self.register_buffer("grid", position_grid(side), persistent=False)  # (s, s, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(self.grid)  # (..., s, s, C)


def _conv_block(cin: int, cout: int, k: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, k, padding=k // 2), *_norm_relu(cout)]


def _norm_relu(channels: int) -> list[nn.Module]:
    # Not in place: instance norm returns a view, and an in-place ReLU on it makes autograd
    # copy the whole activation back (a sixth of a CPU step in a profile).
    return [nn.InstanceNorm2d(channels, affine=True), nn.ReLU()]


class Encoder(nn.Module):
    """Coded flow (B, C, H', W') -> features (B, N, D): conv stages (two convs each, a
    max-pool between stages), the position embedding, then LayerNorm and a two-layer MLP per
    position."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        layers: list[nn.Module] = []
        cin = cfg.channels
        for i, width in enumerate(cfg.enc_channels):
            if i:
                layers.append(nn.MaxPool2d(2, 2, ceil_mode=True))
            layers += _conv_block(cin, width, cfg.kernel_size)
            layers += _conv_block(width, width, cfg.kernel_size)
            cin = width
        self.cnn = nn.Sequential(*layers)
        d = cfg.slot_size
        side = cfg.work_size // 2 ** (len(cfg.enc_channels) - 1)
        self.pos = SoftPositionEmbed(d, side)
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.ReLU(inplace=True), nn.Linear(d, d))

    def forward(self, flow: torch.Tensor) -> torch.Tensor:
        x = self.cnn(flow).permute(0, 2, 3, 1)  # (B, h, w, D)
        x = self.pos(x).flatten(1, 2)  # (B, N, D)
        return self.mlp(self.norm(x))  # (B, N, D)


class SlotAttention(nn.Module):
    """Slots compete for the inputs (softmax over slots), then each takes the weighted mean
    of the values it won and updates through a GRU and a residual MLP (Locatello et al. 2020).

    No step treats one slot differently from another, so permuting the initial slots
    permutes the output slots the same way."""

    def __init__(self, size: int, iters: int, eps: float):
        super().__init__()
        self.iters, self.eps, self.scale = iters, eps, size ** -0.5
        self.norm_inputs, self.norm_slots, self.norm_mlp = (nn.LayerNorm(size) for _ in range(3))
        self.q, self.k, self.v = (nn.Linear(size, size) for _ in range(3))
        self.gru = nn.GRUCell(size, size)
        self.mlp = nn.Sequential(nn.Linear(size, size), nn.ReLU(inplace=True),
                                 nn.Linear(size, size))

    def forward(self, inputs: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor,
                                                                           torch.Tensor]:
        """inputs (B, N, D), initial slots (B, K, D) -> slots (B, K, D) and the last
        iteration's attention (B, K, N), each input's shares over the slots."""
        inputs = self.norm_inputs(inputs)
        k, v = self.k(inputs), self.v(inputs)  # (B, N, D) each
        b, n_slots, d = slots.shape
        attn = slots.new_zeros(b, n_slots, inputs.shape[1])
        for _ in range(self.iters):
            prev = slots
            q = self.q(self.norm_slots(slots))  # (B, K, D)
            logits = torch.einsum("bkd,bnd->bkn", q, k) * self.scale  # (B, K, N)
            attn = logits.softmax(dim=1)  # slots compete for each input
            weights = attn + self.eps
            weights = weights / weights.sum(-1, keepdim=True)  # a weighted mean over inputs
            updates = torch.einsum("bkn,bnd->bkd", weights, v)  # (B, K, D)
            slots = self.gru(updates.reshape(-1, d), prev.reshape(-1, d)).view(b, n_slots, d)
            slots = slots + self.mlp(self.norm_mlp(slots))  # (B, K, D)
        return slots, attn


class BroadcastDecoder(nn.Module):
    """Each slot (B K, D) broadcast to a g x g grid with a position embedding, then three
    stride-2 transposed convs and two convs -> its layer (C channels) and alpha logit.
    With `decoder_scale` s > 1 the last log2(s) transposed convs are left out and the output
    is upsampled bilinearly to the image."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        c, k, d = cfg.dec_channels, cfg.decoder_kernel, cfg.slot_size
        self.side, self.image_size = cfg.work_size // 2 ** UPSAMPLINGS, cfg.image_size
        self.pos = SoftPositionEmbed(d, self.side)
        layers: list[nn.Module] = []
        cin = d
        for _ in range(UPSAMPLINGS - cfg.decoder_scale.bit_length() + 1):
            layers += [nn.ConvTranspose2d(cin, c, k, stride=2, padding=k // 2, output_padding=1),
                       *_norm_relu(c)]
            cin = c
        layers += _conv_block(c, c, k)
        layers.append(nn.Conv2d(c, cfg.channels + 1, k, padding=k // 2))
        self.cnn = nn.Sequential(*layers)

    def forward(self, slots: torch.Tensor) -> torch.Tensor:
        """slots (M, D) -> (M, C + 1, H, W): the layer, then the alpha logit."""
        grid = slots[:, None, None, :].expand(-1, self.side, self.side, -1)  # (M, g, g, D)
        x = self.pos(grid).permute(0, 3, 1, 2)  # (M, D, g, g)
        out = self.cnn(x.contiguous())  # (M, C + 1, H' / s, W' / s)
        if out.shape[-1] != self.image_size:
            out = F.interpolate(out, size=(self.image_size,) * 2, mode="bilinear",
                                align_corners=False)
        return out  # (M, C + 1, H, W)


@dataclass
class Outputs:
    """One forward pass."""

    recon: torch.Tensor  # (B, C, H, W) in the coding: sum over slots of alpha x its layer
    target: torch.Tensor  # (B, C, H, W) the coding of the input flow, which recon should equal
    # In pixels: for "rgb" decoded with the input's top speed (the coding's scale), without
    # gradient (the loss is taken on the coding), and None where `forward(pixels=False)`.
    flow: torch.Tensor | None  # (B, 2, H, W) the reconstruction
    layers: torch.Tensor | None  # (B, K, 2, H, W) each slot's flow layer
    alphas: torch.Tensor  # (B, K, H, W) softmax over slots: each pixel's shares
    slots: torch.Tensor  # (B, K, D)


class MotionGrouping(nn.Module):
    """The autoencoder: flow in pixels (B, 2, H, W) -> `Outputs`. Slots start from K learned
    vectors (the official init; its random Gaussian init is commented out), so a forward pass
    draws nothing at random."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.slots_init = nn.Embedding(cfg.num_slots, cfg.slot_size)
        self.slot_attention = SlotAttention(cfg.slot_size, cfg.iters, cfg.attn_eps)
        self.decoder = BroadcastDecoder(cfg)

    def initial_slots(self, batch: int) -> torch.Tensor:
        return self.slots_init.weight[None].expand(batch, -1, -1)  # (B, K, D)

    def code(self, flow: torch.Tensor) -> torch.Tensor:
        """flow (B, 2, H, W) in pixels -> (B, C, H, W) the network's coding of it."""
        if self.config.input_form == "rgb":
            return flow_to_rgb(flow)  # (B, 3, H, W)
        return flow / self.config.unit_pixels  # (B, 2, H, W)

    def _slots(self, coded: torch.Tensor) -> torch.Tensor:
        x = coded
        if self.config.work_scale > 1:
            x = F.avg_pool2d(x, self.config.work_scale)  # (B, C, H', W')
        feats = self.encoder(x)  # (B, N, D)
        slots, _ = self.slot_attention(feats, self.initial_slots(coded.shape[0]))  # (B, K, D)
        return slots

    def slots(self, flow: torch.Tensor) -> torch.Tensor:
        """flow (B, 2, H, W) in pixels -> the slots (B, K, D) after the last iteration."""
        return self._slots(self.code(flow))

    def forward(self, flow: torch.Tensor, pixels: bool = True) -> Outputs:
        """flow (B, 2, H, W) in pixels -> `Outputs`, its flows in pixels; `pixels` False skips
        decoding the colour coding (the training step needs only the coding)."""
        b, k, c = flow.shape[0], self.config.num_slots, self.config.channels
        target = self.code(flow)  # (B, C, H, W)
        slots = self._slots(target)  # (B, K, D)
        out = self.decoder(slots.flatten(0, 1))  # (B K, C + 1, H, W)
        out = out.view(b, k, c + 1, *out.shape[-2:])  # (B, K, C + 1, H, W)
        coded = out[:, :, :c]  # (B, K, C, H, W)
        alphas = out[:, :, c].softmax(dim=1)  # (B, K, H, W)
        recon = (coded * alphas[:, :, None]).sum(1)  # (B, C, H, W)
        recon_px = layers = None
        if self.config.input_form == "uv":
            unit = self.config.unit_pixels
            layers, recon_px = coded * unit, recon * unit  # (B, K, 2, H, W), (B, 2, H, W)
        elif pixels:
            with torch.no_grad():
                top = top_speed(flow)  # (B,)
                recon_px = rgb_to_flow(recon, top)  # (B, 2, H, W)
                layers = rgb_to_flow(coded.flatten(0, 1), top.repeat_interleave(k))
                layers = layers.view(b, k, 2, *layers.shape[-2:])  # (B, K, 2, H, W)
        return Outputs(recon=recon, target=target, flow=recon_px, layers=layers, alphas=alphas,
                       slots=slots)
