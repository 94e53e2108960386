"""The statistics of an articulated folder that docs/data.md lists, per part, on frame 0.

    .venv/bin/python scripts/articulated_stats.py DATA [--split train] [--limit N]

Per part: its amodal area and length (pose size) in pixels, its joint angle's range (the right
side's convention: + away from the body), how often some of it is hidden (visible names
another part where its amodal mask holds) and the hidden share of its area, and its mean flow
length on its visible pixels.
"""
from __future__ import annotations

import click
import numpy as np

from geogen import figure
from geogen.dataset import open_split
from geogen.errors import GeogenError


@click.command()
@click.argument("data")
@click.option("--split", default="train", show_default=True)
@click.option("--limit", type=int, default=None, help="only the first N samples")
def main(data: str, split: str, limit: int | None) -> None:
    try:
        part = open_split(data, split)
        d = part.read(("amodal", "visible", "pose", "joint_angle", "flow"), limit=limit,
                      t={"amodal": 0, "visible": 0, "pose": 0, "joint_angle": 0, "flow": 0})
    except GeogenError as err:
        raise click.ClickException(str(err)) from None
    if part.slots != figure.PARTS:
        raise click.ClickException(f"{data} does not hold articulated figures")
    amodal, vis = d["amodal"], d["visible"]                             # (N, S, H, W), (N, H, W)
    labels = np.arange(1, len(figure.PARTS) + 1)[None, :, None, None]
    shown = vis[:, None] == labels                                      # (N, S, H, W)
    area = amodal.sum((2, 3))                                           # (N, S)
    hidden = (amodal & ~shown).sum((2, 3))                              # (N, S)
    speed = np.linalg.norm(d["flow"], axis=-1)[:, None]                 # (N, 1, H, W)
    mirror = np.array([figure.spec(p)[1] for p in figure.PARTS])        # (S,)
    angle = d["joint_angle"] * mirror                                   # (N, S)
    click.echo(f"{len(vis)} samples of {data} ({split}), frame 0, {part.size} px")
    click.echo("| part | area px | length px | joint angle (rad) | hidden in | hidden share "
               "| mean flow px |")
    click.echo("|---|---|---|---|---|---|---|")
    for s, name in enumerate(figure.PARTS):
        flow = speed[:, 0][shown[:, s]]
        click.echo(f"| {name} | {area[:, s].mean():.1f} | {d['pose'][:, s, 3].mean():.1f} "
                   f"| {angle[:, s].min():+.2f} .. {angle[:, s].max():+.2f} "
                   f"| {(hidden[:, s] > 0).mean():.0%} "
                   f"| {hidden[:, s].sum() / max(area[:, s].sum(), 1):.0%} "
                   f"| {flow.mean() if flow.size else 0:.2f} |")
    fg = vis > 0
    click.echo(f"figure: {fg.sum((1, 2)).mean():.0f} visible px of {vis[0].size}; mean flow "
               f"{speed[:, 0][fg].mean():.2f} px on it (max {speed[:, 0][fg].max():.1f})")


if __name__ == "__main__":
    main()
