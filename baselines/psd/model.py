"""PSD's network (Xu et al., ICLR 2019): image encoder, motion VAE encoder, kernel decoder,
cross-convolution, motion decoder, structural descriptor and image decoder.

Sizes follow PSD's public model code (zhenjia-xu/psd `model.py`); where the image side sets a
depth (motion encoder, UNet) the depth follows the side. docs/baselines/psd.md lists each
setting and its source.

Letters: B batch, D latent dimensions (= image-feature channels = motion maps; one candidate
part each), H = W image side, H/f the image features' side (f = `feature_stride`, PSD 4), k the
cross-convolution kernel side, 2 flow components (dx, dy). Flow inside the model is in PSD's
units: percent of the image side.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from baselines.psd.config import ModelConfig

# PSD's motion encoder channels before its last conv (7 stride-2 convs to 1x1 at 128 px);
# fewer layers drop channels from the end, and the last layer always gives 2 D numbers (mean
# and log-variance); more repeat the last width.
MOTION_ENCODER_CHANNELS = (16, 16, 32, 32, 64, 64)
IMAGE_ENCODER_CHANNELS = ((32, 2), (32, 1), (64, 2), (64, 1), (32, 1))  # (out, stride), 5x5


def _conv(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1,
          norm: bool = True) -> nn.Sequential:
    """Conv (no bias before batch norm) + BN + LeakyReLU, or a plain biased conv (norm=False)."""
    conv = nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=not norm)
    if not norm:
        return nn.Sequential(conv)
    return nn.Sequential(conv, nn.BatchNorm2d(cout), nn.LeakyReLU(inplace=True))


class ImageEncoder(nn.Module):
    """Frame 0 (B, 3, H, W) -> features (B, D, H/f, W/f): six 5x5 convs, two of stride 2 (PSD,
    f = 4) or the first only (f = 2). The weights are the same for either f, so a run may
    change f between its stages (`set_feature_stride`)."""

    def __init__(self, latent_dim: int, feature_stride: int = 4):
        super().__init__()
        layers, cin = [], 3
        for cout, stride in IMAGE_ENCODER_CHANNELS:
            layers.append(_conv(cin, cout, 5, stride))
            cin = cout
        layers.append(_conv(cin, latent_dim, 5, norm=False))
        self.net = nn.Sequential(*layers)
        # PSD's second halving (an index: a module attribute would add weights to the state)
        self.second = [i for i, b in enumerate(self.net) if b[0].stride == (2, 2)][1]
        self.set_feature_stride(feature_stride)

    def set_feature_stride(self, feature_stride: int) -> None:
        s = feature_stride // 2
        self.net[self.second][0].stride = (s, s)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image.contiguous(memory_format=torch.channels_last))  # (B, D, H/f, W/f)


class MotionEncoder(nn.Module):
    """Flow (B, 2, H, W) in units of the image side -> posterior mean and log-variance (B, D).

    `layers` stride-2 5x5 convs; 2^layers >= H, so the output is 1x1 (a conv on a 1x1 map
    reads its centre tap only)."""

    def __init__(self, layers: int, latent_dim: int):
        super().__init__()
        last = MOTION_ENCODER_CHANNELS[-1]
        widths = (MOTION_ENCODER_CHANNELS + (last,) * layers)[:layers - 1]
        layers, cin = [], 2
        for cout in widths:
            layers.append(_conv(cin, cout, 5, 2))
            cin = cout
        layers.append(_conv(cin, 2 * latent_dim, 5, 2, norm=False))
        self.net = nn.Sequential(*layers)
        self.latent_dim = latent_dim

    def forward(self, flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(flow).flatten(1)  # (B, 2 D)
        return out[:, :self.latent_dim], out[:, self.latent_dim:]  # (B, D), (B, D)


class KernelDecoder(nn.Module):
    """Each latent number z_d -> its own k x k kernel through its own MLP (1 -> 64 -> 128 ->
    64 -> k^2, BN + ReLU). The D MLPs run as one grouped 1x1 convolution per layer."""

    def __init__(self, latent_dim: int, kernel_size: int, hidden: tuple[int, ...]):
        super().__init__()
        d = latent_dim
        layers, cin = [], 1
        for cout in hidden:
            layers += [nn.Conv1d(d * cin, d * cout, 1, groups=d, bias=False),
                       nn.BatchNorm1d(d * cout), nn.ReLU(inplace=True)]
            cin = cout
        layers.append(nn.Conv1d(d * cin, d * kernel_size ** 2, 1, groups=d))
        self.net = nn.Sequential(*layers)
        self.latent_dim, self.kernel_size = d, kernel_size

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        k = self.kernel_size
        out = self.net(z[:, :, None])  # (B, D k^2, 1): group d holds z_d's kernel
        return out.view(z.shape[0], self.latent_dim, k, k)  # (B, D, k, k)


def cross_conv(features: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """Convolve channel d of sample b with kernel (b, d): one grouped conv over B x D groups.

    features (B, D, h, w), kernels (B, D, k, k) -> (B, D, h, w), zero padding, same size
    (cross-correlation, as torch's conv2d and PSD's `conv_cross2d`).
    """
    b, d, h, w = features.shape
    k = kernels.shape[-1]
    out = F.conv2d(features.reshape(1, b * d, h, w), kernels.reshape(b * d, 1, k, k),
                   padding=(k - 1) // 2, groups=b * d)  # (1, B D, h, w)
    return out.view(b, d, h, w)


class MotionDecoder(nn.Module):
    """Cross-convolved features (B, D, H/s, W/s) -> local motion maps (B, 2, D, H, W).

    PSD has one depthwise stack per flow component; here both run as one stack of 2 D
    channels (channel 2d is dimension d's dx chain, 2d + 1 its dy chain), which is the same
    computation in one grouped conv per layer. The stack runs at 1/s of the image side
    (`motion_scale`) and its output is upsampled bilinearly to the image.

    With `odd` (not PSD's) the stack runs as out(x) = net(x) - net(-x): a motion then
    changes sign with its kernel and no input means no motion (docs/baselines/psd.md).
    """

    def __init__(self, latent_dim: int, kernels: tuple[int, ...], odd: bool = False):
        super().__init__()
        d = latent_dim
        layers = []
        for i, k in enumerate(kernels):
            last = i == len(kernels) - 1
            cin, groups = (d, d) if i == 0 else (2 * d, 2 * d)
            layers.append(_conv(cin, 2 * d, k, groups=groups, norm=not last))
        self.net = nn.Sequential(*layers)
        self.latent_dim, self.odd = latent_dim, odd

    def forward(self, x: torch.Tensor, size: int) -> torch.Tensor:
        b = x.shape[0]
        both = torch.cat([x, -x]) if self.odd else x  # (2B or B, D, H/s, W/s)
        # Depthwise convs on CPU are several times faster in channels-last layout.
        out = self.net(both.contiguous(memory_format=torch.channels_last))  # (., 2 D, ., .)
        if self.odd:
            out = out[:b] - out[b:]  # (B, 2 D, H/s, W/s)
        if out.shape[-1] != size:
            out = F.interpolate(out, size=(size, size), mode="bilinear", align_corners=False)
        out = out.reshape(b, self.latent_dim, 2, size, size)  # (B, D, 2, H, W)
        return out.transpose(1, 2)  # (B, 2, D, H, W)


def motion_masks(local: torch.Tensor, norm_eps: float, mask_eps: float) -> torch.Tensor:
    """PSD's part masks: each map's motion magnitude over its (detached) maximum.

    local (B, 2, D, H, W) -> (B, D, H, W), in [0, 1) up to the eps.
    """
    mag = torch.sqrt((local ** 2).sum(1) + norm_eps)  # (B, D, H, W)
    peak = mag.flatten(2).amax(-1).detach()  # (B, D)
    return mag / (peak[:, :, None, None] + mask_eps)


class StructuralDescriptor(nn.Module):
    """Parent-child relations between dimensions: S = sigmoid(logits) on the allowed pairs.

    The motion of parent c is spread over the region of each child j (its mask) with weight
    S[c, j], at the parent's own peak motion (per component, the signed value of largest
    magnitude, detached), as in PSD's `StructuralDescriptor`. Only distinct active
    dimensions may be linked, so the work is done on those A dimensions alone.
    """

    def __init__(self, latent_dim: int, init: float):
        super().__init__()
        self.logits = nn.Parameter(torch.full((latent_dim, latent_dim), init))

    def weights(self, active: torch.Tensor) -> torch.Tensor:
        """(D, D) parent c, child j: sigmoid(logits) where both are distinct active dims."""
        a = active.float()
        allowed = torch.outer(a, a) * (1 - torch.eye(len(a), device=a.device))
        return torch.sigmoid(self.logits) * allowed

    def forward(self, local: torch.Tensor, masks: torch.Tensor,
                active: torch.Tensor) -> torch.Tensor:
        """local (B, 2, D, H, W), masks (B, A, H, W) of the active dims -> global motions
        (B, 2, D, H, W)."""
        idx = torch.nonzero(active).flatten()  # (A,)
        w = self.weights(active)[idx][:, idx]  # (A, A)
        spread = torch.einsum("cj,bjhw->bchw", w, masks)  # (B, A, H, W)
        flat = local[:, :, idx].flatten(3)  # (B, 2, A, P)
        arg = flat.abs().argmax(-1, keepdim=True)  # (B, 2, A, 1)
        peak = flat.gather(-1, arg).detach()  # (B, 2, A, 1) signed peak per component
        extra = torch.zeros_like(local)  # (B, 2, D, H, W)
        extra[:, :, idx] = spread[:, None] * peak[..., None]
        return local + extra


class ImageDecoder(nn.Module):
    """Frame 0 and the (detached) flow -> frame 1: a UNet down to 1x1 (PSD's, after
    pix2pix), whose tanh output is added to frame 0."""

    def __init__(self, image_size: int, width: int, down_bias: bool = False):
        super().__init__()
        levels = int(math.log2(image_size))  # PSD: 7 at 128 px
        ch = [min(width * 2 ** i, width * 8) for i in range(levels)]
        self.downs, self.ups = nn.ModuleList(), nn.ModuleList()
        cin = 5
        for i in range(levels):
            inner = i == levels - 1
            layers: list[nn.Module] = [] if i == 0 else [nn.LeakyReLU(0.2, inplace=False)]
            layers.append(nn.Conv2d(cin, ch[i], 4, 2, 1, bias=down_bias and (i == 0 or inner)))
            if 0 < i < levels - 1:
                layers.append(nn.BatchNorm2d(ch[i]))
            self.downs.append(nn.Sequential(*layers))
            cin = ch[i]
        for i in reversed(range(levels)):
            cin = ch[i] if i == levels - 1 else 2 * ch[i]
            cout = 3 if i == 0 else ch[i - 1]
            last: nn.Module = nn.Tanh() if i == 0 else nn.BatchNorm2d(cout)
            self.ups.append(nn.Sequential(nn.ReLU(), nn.ConvTranspose2d(cin, cout, 4, 2, 1,
                                                                        bias=i == 0), last))

    def forward(self, image: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        x = torch.cat([image, flow], 1)  # (B, 5, H, W)
        skips = []
        for down in self.downs:
            x = down(x)
            skips.append(x)
        y = self.ups[0](skips.pop())
        for up in self.ups[1:]:
            y = up(torch.cat([skips.pop(), y], 1))
        return image + y  # (B, 3, H, W)


def init_weights(model: nn.Module, bn_std: float) -> None:
    """PSD's `init_weights`: Kaiming-normal conv and linear weights (the kernel decoder's
    grouped Conv1d stands for its Linear layers), zero biases, batch-norm gains drawn from
    normal(1, bn_std) and zero shifts; transposed convs keep torch's default, as in PSD."""
    for m in model.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            nn.init.normal_(m.weight, 1.0, bn_std) if bn_std > 0 else nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


@dataclass
class Outputs:
    """One forward pass. Motions and flow in percent of the image side."""

    mean: torch.Tensor  # (B, D) posterior mean
    log_var: torch.Tensor  # (B, D)
    local: torch.Tensor  # (B, 2, D, H, W) motion maps before the structure
    flow: torch.Tensor  # (B, 2, H, W) the sum over dimensions of the (global) motions
    image: torch.Tensor  # (B, 3, H, W) predicted frame 1


class PSD(nn.Module):
    """The whole model. `active` (a buffer) is empty in stage 1; stage 2 sets it, which
    freezes the motion encoder (its outputs are detached) and turns on the structure."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.config = cfg
        d = cfg.latent_dim
        self.image_encoder = ImageEncoder(d, cfg.feature_stride)
        self.motion_encoder = MotionEncoder(cfg.encoder_layers, d)
        self.kernel_decoder = KernelDecoder(d, cfg.kernel_size, cfg.kernel_hidden)
        self.motion_decoder = MotionDecoder(d, cfg.motion_kernels, cfg.odd_motion)
        self.structure = StructuralDescriptor(d, cfg.structure_init)
        self.image_decoder = ImageDecoder(cfg.image_size, cfg.unet_width, cfg.unet_down_bias)
        self.register_buffer("active", torch.zeros(d, dtype=torch.bool))
        for conv_stack in (self.image_encoder, self.motion_decoder):
            conv_stack.to(memory_format=torch.channels_last)  # faster CPU convs, same numbers
        init_weights(self, cfg.bn_init_std)

    @property
    def stage2(self) -> bool:
        return bool(self.active.any())

    def set_active(self, dims: list[int]) -> None:
        self.active.zero_()
        self.active[torch.as_tensor(dims, dtype=torch.long)] = True

    def active_dims(self) -> list[int]:
        return [int(i) for i in torch.nonzero(self.active).flatten()]

    def encode(self, flow_px: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """flow_px (B, 2, H, W) in pixels -> posterior mean, log-variance (B, D)."""
        return self.motion_encoder(flow_px / self.config.image_size)

    @property
    def feature_stride(self) -> int:
        """The image features' grid now: `stage2_feature_stride` in stage 2 when it is set."""
        cfg = self.config
        return cfg.stage2_feature_stride if self.stage2 and cfg.stage2_feature_stride \
            else cfg.feature_stride

    def local_motions(self, image: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Frame 0 (B, 3, H, W) and latents (B, D) -> local motion maps (B, 2, D, H, W)."""
        self.image_encoder.set_feature_stride(self.feature_stride)
        feats = self.image_encoder(image)  # (B, D, H/f, W/f)
        feats = cross_conv(feats, self.kernel_decoder(z))  # (B, D, H/f, W/f)
        side = self.config.image_size // self.config.motion_scale
        feats = F.interpolate(feats, size=(side, side), mode="nearest")  # (B, D, H/s, W/s)
        return self.motion_decoder(feats, self.config.image_size)  # (B, 2, D, H, W)

    def masks(self, local: torch.Tensor) -> torch.Tensor:
        return motion_masks(local, self.config.norm_eps, self.config.mask_eps)  # (B, D, H, W)

    def forward(self, image: torch.Tensor, flow_px: torch.Tensor,
                gen: torch.Generator | None = None) -> Outputs:
        """Training pass: z sampled from the posterior with `gen`; posterior mean when None."""
        mean, log_var = self.encode(flow_px)  # (B, D) each
        if self.stage2:  # PSD: the motion encoder is fixed once the dimensions are chosen
            mean, log_var = mean.detach(), log_var.detach()
        z = mean
        if gen is not None:
            noise = torch.randn(mean.shape, generator=gen, device=mean.device)  # (B, D)
            z = mean + noise * torch.exp(0.5 * log_var)
        local = self.local_motions(image, z)  # (B, 2, D, H, W)
        motion = local
        if self.stage2:
            masks = self.masks(local[:, :, self.active])  # (B, A, H, W)
            motion = self.structure(local, masks, self.active)
            if self.config.stage2_flow == "active":
                motion = motion[:, :, self.active]  # (B, 2, A, H, W)
        flow = motion.sum(2)  # (B, 2, H, W)
        return Outputs(mean=mean, log_var=log_var, local=local, flow=flow,
                       image=self.image_decoder(image, flow.detach()))
