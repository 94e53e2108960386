"""Can the quick profile's encoder localise Geo+ shapes by class when told where they are?

Trains the encoder's heat-map translation head alone (one heat map per class, the ring prior
off) on each class's amodal centroid in frame 0, then reports the test localisation error in
pixels. If this supervised encoder localises well, the self-supervised training's pose errors
come from its signal, not from the encoder's capacity.

    python supervised_probe.py DATA --minutes 8 --seed 0 [--channels 32,32,64,64] [--lr 1e-3]
        [--norm group|group_from1] --out probe.json
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import numpy as np
import torch

from flowcaps import geometry
from flowcaps.model import Encoder
from flowcaps.profiles import quick
from geogen.dataset import read_split

CLASSES = ("circle", "square", "triangle")


def centroids(amodal: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """amodal (N, S, H, W) -> centres (N, S, 2) in the image frame, present (N, S) bool."""
    a = torch.from_numpy(amodal.astype(np.float32))  # (N, S, H, W)
    n, s, h, w = a.shape
    u = geometry.pixel_centres(h, w)  # (H*W, 2)
    flat = a.flatten(2)  # (N, S, H*W)
    area = flat.sum(2)  # (N, S)
    c = flat @ u / area.clamp_min(1)[..., None]  # (N, S, 2)
    return c, area > 0


def load(root: str, split: str, limit: int):
    d = read_split(root, split, ("frames", "amodal"), limit=limit)
    img = torch.from_numpy(d["frames"][:, 0]).permute(0, 3, 1, 2).float() / 255  # (N, 3, H, W)
    c, present = centroids(d["amodal"][:, 0])
    return img, c, present


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--minutes", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--channels", default="32,32,64,64")
    ap.add_argument("--norm", choices=("none", "group", "group_from1"), default="none",
                    help="group: GroupNorm(8) after each conv, before its ReLU; group_from1: "
                         "not after the first (full-resolution) conv")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    channels = tuple(int(c) for c in args.channels.split(","))
    cfg = dataclasses.replace(quick().model, num_capsules=len(CLASSES), enc_channels=channels)
    enc = Encoder(cfg)
    enc.prior_gain.zero_()  # a pure detector: no start positions to lean on
    if args.norm != "none":
        first = 1 if args.norm == "group_from1" else 0
        for i, conv in enumerate(enc.convs):
            if i >= first:
                enc.convs[i] = torch.nn.Sequential(conv, torch.nn.GroupNorm(8, conv.out_channels))
    x_tr, c_tr, p_tr = load(args.data, "train", args.train)
    x_te, c_te, p_te = load(args.data, "test", args.test)
    half = x_tr.shape[-1] / 2  # image-frame units -> pixels
    opt = torch.optim.Adam(enc.parameters(), lr=args.lr)
    start, step, log = time.time(), 0, []
    while time.time() - start < args.minutes * 60:
        idx = torch.randint(0, x_tr.shape[0], (args.batch,), generator=gen)
        _, t = enc(x_tr[idx])  # (B, S, 2)
        err = ((t - c_tr[idx]) ** 2).sum(-1)  # (B, S)
        m = p_tr[idx].float()  # (B, S)
        loss = (err * m).sum() / m.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 500 == 0:
            log.append({"step": step, "minutes": (time.time() - start) / 60,
                        "rms_px": float(loss.detach().sqrt() * half)})
            print(log[-1], flush=True)
    enc.eval()
    with torch.no_grad():
        t = torch.cat([enc(x_te[i:i + 200])[1] for i in range(0, x_te.shape[0], 200)])  # (N, S, 2)
    dist = ((t - c_te) ** 2).sum(-1).sqrt() * half  # (N, S) px
    result = {"data": args.data, "seed": args.seed, "channels": channels, "steps": step,
              "pairs": step * args.batch, "minutes": args.minutes, "lr": args.lr,
              "threads": torch.get_num_threads(),
              "norm": args.norm, "log": log, "test": {}}
    for s, name in enumerate(CLASSES):
        d = dist[:, s][p_te[:, s]]
        result["test"][name] = {"mean_px": float(d.mean()), "median_px": float(d.median()),
                                "within_1.5px": float((d < 1.5).float().mean()), "n": int(d.numel())}
    print(json.dumps(result["test"], indent=1))
    with open(args.out + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
