"""Forward and backward time of the quick profile's encoder under each normalisation.

Batch 16 (one rank's half of a quick step's 2 x 16 frames), one thread, bf16 autocast as the
profile has it where the CPU computes bf16, compiled; the variants timed in turn, six rounds of
15 steps each, so a slow spell of the machine touches all of them.

    python experiments/2026-11-29-encoder-batchnorm/encoder_norm_cost.py   # from the repository root
"""
import dataclasses
import statistics
import time

import torch
import torch.nn as nn

from flowcaps import PROFILES
from flowcaps.model import Encoder


class ManualGroupNorm(nn.GroupNorm):
    """GroupNorm written as reductions that torch.compile can fuse, in float32."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        g = x.float().view(b, self.num_groups, -1)  # (B, G, c/G*h*w)
        var, mean = torch.var_mean(g, -1, keepdim=True, correction=0)
        y = ((g - mean) * torch.rsqrt(var + self.eps)).view(b, c, h, w)  # (B, c, h, w)
        return (y * self.weight[:, None, None] + self.bias[:, None, None]).to(x.dtype)


def encoder(variant: str) -> Encoder:
    model = PROFILES["quick"]().model
    enc = Encoder(dataclasses.replace(model, enc_norm=0 if variant == "none" else 8))  # GroupNorm
    # The other two in GroupNorm's places (BatchNorm2d as the removed enc_norm_kind="batch" had it)
    swap = {"manual group": lambda c: ManualGroupNorm(8, c), "batch": nn.BatchNorm2d}.get(variant)
    if swap:
        enc.norms = nn.ModuleList([nn.Identity()] + [swap(n.num_channels) for n in enc.norms[1:]])
    return enc


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    size = PROFILES["quick"]().model.image_size
    x = torch.rand(16, 3, size, size)  # (B, 3, H, W)
    steps = {}
    for variant in ("none", "group", "manual group", "batch"):
        f = torch.compile(encoder(variant))

        def step(f=f):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                raw, t = f(x)  # (B, K, C), (B, K, 2)
                loss = raw.float().square().mean() + t.square().mean()
            loss.backward()
        for _ in range(5):  # compile and warm up
            step()
        steps[variant] = step
    times = {v: [] for v in steps}
    for _ in range(6):
        for v, step in steps.items():
            t0 = time.perf_counter()
            for _ in range(15):
                step()
            times[v].append((time.perf_counter() - t0) / 15 * 1000)
    for v, ts in times.items():
        print(f"{v:13s} median {statistics.median(ts):5.1f} ms, min {min(ts):5.1f}  "
              + " ".join(f"{t:.1f}" for t in ts), flush=True)


if __name__ == "__main__":
    main()
