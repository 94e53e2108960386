"""Where the loss's sampled points land: the share of the sampling density on the shapes.

For the first N test pairs of a geogen folder, the points' density q = (1 - mix) uniform + mix
edge density (as `flowcaps.losses.sample_indices` draws them), with the trainer's edge density
(|grad I| + |grad I'|, "gradient") and with the frame difference |I' - I| ("difference", as
`edge_source="difference"` drew them), and its mass on the shapes (the union of every slot's
amodal mask in both frames) and within 3 px of them. Prints one line per density.

    python density_on_shapes.py data/geoplus-quick [--pairs 200] [--mix 0.8] [--sigma 3]
"""
from __future__ import annotations

import click
import torch
import torch.nn.functional as F

from flowcaps import geometry
from flowcaps.losses import edge_density
from geogen.dataset import read_split


def difference_density(img0: torch.Tensor, img1: torch.Tensor, sigma: float) -> torch.Tensor:
    """|I' - I| blurred by sigma px, each row summing to 1: (B, H*W)."""
    b, _, h, w = img0.shape
    e = geometry.gaussian_blur((img1 - img0).abs().sum(1, keepdim=True), sigma).reshape(b, h * w)
    return e / e.sum(1, keepdim=True).clamp_min(1e-12)


@click.command()
@click.argument("data")
@click.option("--pairs", default=200, show_default=True)
@click.option("--mix", default=0.8, show_default=True, help="TrainConfig.edge_sampling")
@click.option("--sigma", default=3.0, show_default=True, help="TrainConfig.edge_sigma")
def main(data: str, pairs: int, mix: float, sigma: float) -> None:
    torch.set_num_threads(1)
    split = read_split(data, "test", ("frames", "amodal"), limit=pairs)
    frames = torch.from_numpy(split["frames"]).permute(0, 1, 4, 2, 3).float() / 255  # (N, T, 3, H, W)
    amodal = torch.from_numpy(split["amodal"]).float()  # (N, T, S, H, W)
    shapes = amodal[:, :2].amax(2).amax(1, keepdim=True)  # (N, 1, H, W) either frame, any slot
    near = F.max_pool2d(shapes, 7, 1, 3).flatten(1)  # (N, H*W) within 3 px
    on = shapes.flatten(1)  # (N, H*W)
    n = on.shape[1]
    click.echo(f"{data}, first {len(on)} test pairs: shapes cover {float(on.mean()):.3f} of the "
               f"pixels, {float(near.mean()):.3f} within 3 px")
    for source, density in (("gradient", edge_density), ("difference", difference_density)):
        q = (1 - mix) / n + mix * density(frames[:, 0], frames[:, 1], sigma)  # (N, H*W)
        click.echo(f"  {source:10s} mass on the shapes {float((q * on).sum(1).mean()):.3f}, "
                   f"within 3 px {float((q * near).sum(1).mean()):.3f}")


if __name__ == "__main__":
    main()
