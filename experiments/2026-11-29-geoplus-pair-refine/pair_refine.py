"""Test-time pose refinement by the pair's own training objective, scored on frame 0.

(`--refine flat|still` scores `flowcaps.refine_poses` instead, on frame 0 alone.)

For the first N test pairs: encode both frames, then fit both frames' poses (shape codes and
depths kept) by Adam on the trainer's loss of the pair (render both ways, appearance, centre,
smoothness, as the checkpoint was trained), no label used. Prints the fixed-assignment amodal
IoU of frame 0 with the encoder's poses and with the fitted ones (assignment chosen on the N
pairs, each scoring apart).
"""
from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch

from benchmark.metrics import SegmentationScore
from flowcaps import geometry
from flowcaps import RefineConfig, refine_poses
from flowcaps.checkpoint import config_of, load, read
from flowcaps.losses import appearance_loss, direction_loss, edge_density, sample_indices
from geogen.dataset import read_split


def fit_pair(model, cfg, img0, img1, steps, lr, points, gen, appearance_only=False):
    """-> poses of frame 0 and frame 1 (B, K, 4) fitted to the pair."""
    b, _, h, w = img0.shape
    with torch.no_grad():
        s0, p0, d0 = model.encode(img0)
        s1, p1, d1 = model.encode(img1)
    if steps == 0:
        return p0, p1, (s0, d0)
    pyr0 = [geometry.gaussian_blur(img0, s) for s in cfg.blur_sigmas]
    pyr1 = [geometry.gaussian_blur(img1, s) for s in cfg.blur_sigmas]
    density = edge_density(img0, img1, cfg.edge_sigma) if cfg.edge_sampling > 0 else None
    x0 = p0.clone().requires_grad_(True)
    x1 = p1.clone().requires_grad_(True)
    opt = torch.optim.Adam([x0, x1], lr=lr)
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        idx, wt = sample_indices(b, h, w, points, gen, img0.device, density, cfg.edge_sampling)
        idx1, wt1 = sample_indices(b, h, w, points, gen, img0.device, density, cfg.edge_sampling)
        if appearance_only:
            loss = 0
            for (s, x, d, src, dst, ix, wx) in ((s0, x0, d0, img0, img1, idx, wt),
                                                (s1, x1, d1, img1, img0, idx1, wt1)):
                u = geometry.index_to_coords(ix, h, w)
                pm = model.masks_at(s, x, d, u)
                loss = loss + appearance_loss(pm.visible, geometry.gather_pixels(src, ix).float(),
                                              wx, geometry.gather_pixels(dst, ix).float())
            loss = loss * b / 2
        else:
            t0 = direction_loss(model, (s0, x0, d0), (s1, x1, d1), pyr0, pyr1, idx, cfg, 1.0, wt)
            t1 = direction_loss(model, (s1, x1, d1), (s0, x0, d0), pyr1, pyr0, idx1, cfg, 1.0, wt1)
            # Summed over the batch: each image's loss reaches only its own poses.
            loss = (t0.total + t1.total) * b / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for x in (x0, x1):
                x[..., 3].clamp_(min=model.config.scale_min)
    return x0.detach(), x1.detach(), (s0, d0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("data")
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--points", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--set", action="append", default=[], help="TrainConfig loss field=value")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--appearance-only", action="store_true")
    ap.add_argument("--refine", choices=("pair", "flat", "still"), default="pair",
                    help="pair: this script's fit of both frames; flat / still: "
                         "flowcaps.refine_poses on frame 0 with a flat background / frame 1's pixels")
    ap.add_argument("--out")
    a = ap.parse_args()
    torch.set_flush_denormal(True)
    model = load(a.checkpoint)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    cfg = config_of(read(a.checkpoint)).replace(bf16=False)
    for kv in a.set:
        k, v = kv.split("=", 1)
        cfg = cfg.replace(**{k: float(v)})
    test = read_split(a.data, "test", ("frames", "amodal", "visible", "present"), limit=a.pairs)
    frames = np.ascontiguousarray(test["frames"].transpose(0, 1, 4, 2, 3), dtype=np.float32) / 255
    gen = torch.Generator().manual_seed(a.seed)
    side = frames.shape[-1]
    k = model.config.num_capsules
    enc, fit = SegmentationScore(K=k), SegmentationScore(K=k)
    shifts = []
    t_start = time.time()
    for lo in range(0, len(frames), a.batch):
        img0 = torch.from_numpy(frames[lo:lo + a.batch, 0])
        img1 = torch.from_numpy(frames[lo:lo + a.batch, 1])
        b = len(img0)
        with torch.no_grad():
            _, p_enc, _ = model.encode(img0)
        if a.refine == "pair":
            x0, _, (s0, d0) = fit_pair(model, cfg, img0, img1, a.steps, a.lr, a.points, gen,
                                        a.appearance_only)
        else:
            with torch.no_grad():
                s0, _, d0 = model.encode(img0)
            x0 = refine_poses(model, img0, s0, p_enc, d0, RefineConfig(steps=a.steps, lr=a.lr),
                              img1 if a.refine == "still" else None)
        u = geometry.pixel_centres(side, side).expand(b, -1, -1)
        gt = (test["amodal"][lo:lo + b, 0], test["visible"][lo:lo + b, 0],
              test["present"][lo:lo + b].astype(bool))
        for pose, score in ((p_enc, enc), (x0, fit)):
            with torch.no_grad():
                pm = model.masks_at(s0, pose, d0, u)
            score.update(pm.masks.view(b, k, side, side).numpy(),
                         pm.visible.view(b, k, side, side).numpy(), *gt)
        shifts.append(((x0 - p_enc)[..., :2].norm(dim=-1) * side / 2).mean().item())
        print(f"{lo + b} pairs, {time.time() - t_start:.0f} s", flush=True)
    res = {"args": vars(a), "encoder": enc.compute(), "fitted": fit.compute(),
           "mean_shift_px": float(np.mean(shifts)), "seconds": time.time() - t_start}
    for name in ("encoder", "fitted"):
        r = res[name]
        print(name, {c: round(v, 3) for c, v in r["amodal_iou"].items()},
              "per image", round(r["amodal_iou_per_image"]["all"], 3),
              "visible", round(r["visible_iou"]["all"], 3), r["assignment"])
    print("mean shift px", round(res["mean_shift_px"], 2))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
