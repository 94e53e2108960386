"""The Guess What Moves mask network: ONE RGB frame in, K soft masks out (a softmax over the
masks at every pixel). Motion is only in the training loss (`losses.py`); this network never
sees flow.

The official network is MaskFormer (K object queries over a DINO ViT-B/8's features and a
pixel decoder); here it is a small UNet trained from scratch (docs/baselines/gwm.md,
"Settings against the official"), whose last 1x1 conv gives the K mask logits, as
MaskFormer's query-pixel products do.

Letters: B batch, K masks, C channels, H = W image side.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from baselines.gwm.config import ModelConfig

# ImageNet's statistics: the official normalises frames with them (MODEL.PIXEL_MEAN/STD);
# kept so a pretrained backbone could replace the encoder without changing the input.
PIXEL_MEAN = (0.485, 0.456, 0.406)
PIXEL_STD = (0.229, 0.224, 0.225)


def _block(cin: int, cout: int, groups: int) -> nn.Sequential:
    """Two 3x3 convs, each followed by group norm and ReLU."""
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(groups, cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(groups, cout),
                         nn.ReLU())


@dataclass
class Outputs:
    logits: torch.Tensor  # (B, K, H, W)
    masks: torch.Tensor  # (B, K, H, W) softmax over K: each pixel's shares, summing to 1
    features: torch.Tensor  # (B, C, H, W) the last decoder level's features


class MaskNet(nn.Module):
    """frame (B, 3, H, W) in [0, 1] -> `Outputs`. Deterministic: nothing is drawn at random."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.config = cfg
        w, g = cfg.widths, cfg.groups
        self.down = nn.ModuleList(_block(cin, cout, g) for cin, cout in zip((3, *w[:-1]), w))
        # Each decoder level: upsample the coarser level, concatenate the skip, two convs.
        self.up = nn.ModuleList(_block(w[i + 1] + w[i], w[i], g) for i in range(cfg.levels - 1))
        self.head = nn.Conv2d(w[0], cfg.num_masks, 1)
        self.register_buffer("mean", torch.tensor(PIXEL_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(PIXEL_STD).view(1, 3, 1, 1), persistent=False)

    def forward(self, frame: torch.Tensor) -> Outputs:
        x = (frame - self.mean) / self.std  # (B, 3, H, W)
        skips = []
        for i, block in enumerate(self.down):
            if i:
                x = F.max_pool2d(x, 2)  # (B, C, H / 2^i, W / 2^i)
            x = block(x)
            skips.append(x)
        for i in reversed(range(self.config.levels - 1)):
            x = F.interpolate(x, size=skips[i].shape[-2:], mode="bilinear", align_corners=False)
            x = self.up[i](torch.cat([x, skips[i]], 1))  # (B, w_i, H / 2^i, W / 2^i)
        logits = self.head(x)  # (B, K, H, W)
        return Outputs(logits=logits, masks=logits.softmax(dim=1), features=x)

    def masks(self, frame: torch.Tensor) -> torch.Tensor:
        """frame (B, 3, H, W) in [0, 1] -> the soft masks (B, K, H, W)."""
        return self(frame).masks
