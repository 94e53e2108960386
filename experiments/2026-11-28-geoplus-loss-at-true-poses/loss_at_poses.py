"""Does the training loss prefer the true poses? The loss at the encoder's poses against the
loss at poses fitted to the ground truth, on the same test pairs.

For each class, the capsule the fixed assignment gives it (chosen on these pairs' frame 0) has
its 4 pose numbers fitted to the class's amodal mask, in both frames, shapes and depths kept
(`benchmark.diagnose.fit_poses`, as `flowbench diagnose --probe oracle`); the other capsules keep
the encoder's poses. Both sets are scored by the checkpoint's own training loss (both directions,
float32, every pixel of the grid instead of sampled points, the centre term at full weight).

With --refine N it also descends that loss (both frames, both directions, every pixel) in all
capsules' poses for N Adam steps from the encoder's, depths and shapes kept, and scores frame 0's
masks as the benchmark does (fixed assignment chosen on these pairs): whether local descent of
the training loss reaches the poses the ground truth wants.

    python experiments/2026-11-28-geoplus-loss-at-true-poses/loss_at_poses.py CKPT DATA [--pairs 200] [--refine 100]
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from benchmark.diagnose import fit_poses
from benchmark.metrics import SegmentationScore
from flowcaps import checkpoint, geometry
from flowcaps.losses import direction_loss
from geogen.dataset import read_split
from geogen.schema import SLOTS

TERMS = ("render", "appearance", "center", "smooth", "overlap")


def pyramids_and_grid(cfg, img0, img1):
    """Both frames' blurred copies (the render loss's levels) and every pixel's index (B, H*W)."""
    b, _, h, w = img0.shape
    pyr0 = [geometry.gaussian_blur(img0, s) for s in cfg.blur_sigmas]
    pyr1 = [geometry.gaussian_blur(img1, s) for s in cfg.blur_sigmas]
    return pyr0, pyr1, torch.arange(h * w).expand(b, -1)


def terms_of(model, cfg, img0, img1, caps0, caps1) -> dict[str, np.ndarray]:
    """Per-image loss terms (weighted as in training) of both directions, full grid."""
    b = img0.shape[0]
    pyr0, pyr1, idx = pyramids_and_grid(cfg, img0, img1)
    weights = {"render": 1.0, "appearance": cfg.w_appearance, "center": cfg.w_center,
               "smooth": cfg.w_smooth, "overlap": cfg.w_overlap}
    out = {t: np.zeros(b) for t in (*TERMS, "total")}
    for i in range(b):  # per image: the loss terms are batch means
        one = lambda c: tuple(x[i:i + 1] for x in c)  # noqa: E731
        for ca, cb, pa, pb in ((caps0, caps1, pyr0, pyr1), (caps1, caps0, pyr1, pyr0)):
            t = direction_loss(model, one(ca), one(cb), [p[i:i + 1] for p in pa],
                               [p[i:i + 1] for p in pb], idx[i:i + 1], cfg, 1.0)
            for name in TERMS:
                out[name][i] += weights[name] * float(getattr(t, name)) / 2
            out["total"][i] += float(t.total) / 2  # the trainer's own sum, every term in it
    return out


def refine_both(model, cfg, img0, img1, caps0, caps1, steps: int, lr: float = 3e-3):
    """Poses of both frames descended on the training loss (see the module); -> caps0, caps1."""
    pyr0, pyr1, idx = pyramids_and_grid(cfg, img0, img1)
    x0 = caps0[1].clone().requires_grad_(True)  # (B, K, 4)
    x1 = caps1[1].clone().requires_grad_(True)  # (B, K, 4)
    opt = torch.optim.Adam([x0, x1], lr=lr)
    with torch.enable_grad():
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"] = lr * 0.5 * (1 + np.cos(np.pi * step / steps))
            c0, c1 = (caps0[0], x0, caps0[2]), (caps1[0], x1, caps1[2])
            # batch means: Adam's steps do not depend on the 1/B, so each image refines alone
            loss = (direction_loss(model, c0, c1, pyr0, pyr1, idx, cfg, 1.0).total
                    + direction_loss(model, c1, c0, pyr1, pyr0, idx, cfg, 1.0).total)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                for x in (x0, x1):
                    x[..., 3].clamp_(min=model.config.scale_min)
    return ((caps0[0], x0.detach(), caps0[2]), (caps1[0], x1.detach(), caps1[2]))


def frame0_score(model, img0, caps0, test, present) -> dict:
    """The benchmark's segmentation scores of frame 0's masks under the poses in caps0."""
    b, _, h, w = img0.shape
    u = geometry.pixel_centres(h, w, img0.device).expand(b, -1, -1)  # (B, H*W, 2)
    with torch.no_grad():
        pm = model.masks_at(*caps0, u)
    k = pm.masks.shape[1]
    score = SegmentationScore(K=k)
    score.update(pm.masks.view(b, k, h, w).numpy(), pm.visible.view(b, k, h, w).numpy(),
                 test["amodal"][:, 0], test["visible"][:, 0], present)
    out = score.compute()
    return {"amodal_iou": out["amodal_iou"], "amodal_iou_per_image": out["amodal_iou_per_image"],
            "assignment": out["assignment"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("data")
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--split", default="test", help="test, or train to compare the fit on seen pairs")
    ap.add_argument("--refine", type=int, default=0, help="Adam steps of two-frame refinement")
    ap.add_argument("--out", default=None, help="write the summary as JSON here")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_flush_denormal(True)
    blob = checkpoint.read(args.checkpoint)
    cfg = checkpoint.config_of(blob).replace(bf16=False)
    model = checkpoint.load(args.checkpoint).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    test = read_split(args.data, args.split, ("frames", "amodal", "visible", "present"),
                      limit=args.pairs)
    frames = torch.from_numpy(test["frames"]).permute(0, 1, 4, 2, 3).float() / 255  # (N, 2, 3, H, W)
    img0, img1 = frames[:, 0].contiguous(), frames[:, 1].contiguous()
    present = test["present"].astype(bool)  # (N, S)
    with torch.no_grad():
        enc0, enc1 = model.encode(img0), model.encode(img1)
    slots = frame0_score(model, img0, enc0, test, present)["assignment"]
    assignment = np.array([slots[name] for name in SLOTS])
    fitted = []
    for f, enc in ((0, enc0), (1, enc1)):
        shape, pose, depth = enc
        pose = pose.clone()
        for s, k in enumerate(assignment):
            sel = np.flatnonzero(present[:, s])
            if k < 0 or len(sel) == 0:
                continue
            gt = torch.from_numpy(test["amodal"][sel, f, s]).float()  # (n, H, W)
            pose[sel, k:k + 1] = fit_poses(model, shape[sel, k:k + 1], pose[sel, k:k + 1], gt,
                                           300, 3e-3)
        fitted.append((shape, pose, depth))
    with torch.no_grad():
        at_enc = terms_of(model, cfg, img0, img1, enc0, enc1)
        at_fit = terms_of(model, cfg, img0, img1, fitted[0], fitted[1])
    summary = {"checkpoint": args.checkpoint, "data": args.data, "pairs": len(img0),
               "assignment": [int(k) for k in assignment],
               "encoder_poses": {t: float(v.mean()) for t, v in at_enc.items()},
               "fitted_poses": {t: float(v.mean()) for t, v in at_fit.items()},
               "share_lower_at_fitted": {t: float((at_fit[t] < at_enc[t]).mean())
                                         for t in at_enc}}
    if args.refine:
        ref0, ref1 = refine_both(model, cfg, img0, img1, enc0, enc1, args.refine)
        with torch.no_grad():
            at_ref = terms_of(model, cfg, img0, img1, ref0, ref1)
        summary["refined_poses"] = {t: float(v.mean()) for t, v in at_ref.items()}
        summary["refine_steps"] = args.refine
        summary["frame0_encoder"] = frame0_score(model, img0, enc0, test, present)
        summary["frame0_refined"] = frame0_score(model, img0, ref0, test, present)
    print(json.dumps(summary, indent=2))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(summary, fh, indent=2, sort_keys=True)
            fh.write("\n")


if __name__ == "__main__":
    main()
