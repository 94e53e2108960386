"""Why one R-NEM group takes every shape: a short training run of the quick profile with
overrides, then (1) who owns what on validation clips and whether the losers get any gradient,
and (2) gamma scored on test pairs (visible IoU, fixed assignment and per image).
Usage (from the repository root; EVERY=10 logs every 10th step; STATE=file continues the run
saved there, if any, and saves it at the end, so a probe can go on in pieces of a few minutes;
SCORE=0 skips (2)):
  probe.py CLIPS TEST MINUTES '{"model": {...}, "batch_size": 8}' [SEED [MAX_STEPS]]

(1) at every step whose target frame has ground truth, per image: the background's owner (the
group with the most gamma on background pixels) and each shape's owner (most gamma on the
shape's visible pixels). Printed: how often a shape's owner is the background's owner; the
owner's mean gamma on its shape and the best other group's; the squared colour error on the
shape of the owner's prediction, the best other group's and the prior's; and `pull`, the
other groups' intra-term gradient on the shape's pixels against the owner's,
sum |gamma (mu - x)| over the others / the owner's (~0: only the owner learns the shape).
"""
import json
import os
import sys
import time

import numpy as np
import torch
from torch.nn import functional as F

from baselines.rnem.config import profile
from baselines.rnem.model import RNEM, schedule
from baselines.rnem.trainer import clip_loss, corrupt, groups_used, load_clips
from benchmark.datasets import read_checked
from benchmark.methods.rnem import RnemMethod
from benchmark.metrics import SegmentationScore
from geogen.dataset import open_split

clips_root, test_root, minutes, over = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
seed = int(sys.argv[5]) if len(sys.argv) > 5 else 0
max_steps = int(sys.argv[6]) if len(sys.argv) > 6 else 10**9
torch.set_num_threads(1)
over = json.loads(over)
cfg = profile("quick", "/tmp/unused").replace(**over, seed=seed)
cfg.validate()
clips = torch.from_numpy(load_clips(clips_root, cfg))
print("clips", tuple(clips.shape), "cfg", json.dumps(over), "seed", seed, flush=True)
torch.manual_seed(seed)
model = RNEM(cfg.model).train()
every = int(os.environ.get("EVERY", "10"))
opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
t0, step = time.time(), 0
state_file = os.environ.get("STATE")
if state_file and os.path.exists(state_file):
    saved = torch.load(state_file, weights_only=True)
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["opt"])
    step = int(saved["step"])
    print("continued from", state_file, "at step", step, flush=True)
while time.time() - t0 < minutes * 60 and step < max_steps:
    gen = torch.Generator().manual_seed(seed * 1000003 + step)
    idx = torch.randint(len(clips), (cfg.batch_size,), generator=gen)
    clip = clips[idx].float() / 255
    total, intra, inter, gamma = clip_loss(model, clip, cfg, gen)
    opt.zero_grad(set_to_none=True)
    total.backward()
    if cfg.grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    step += 1
    if step % every == 0 or step == 1:
        g = gamma.detach()
        print(f"step {step} t {time.time() - t0:.0f}s loss {total.item():.1f} intra "
              f"{intra.item():.1f} inter {inter.item():.1f} groups {groups_used(g):.2f} "
              f"gmax {g.max(1).values.mean().item():.3f}", flush=True)
if state_file:
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step},
               state_file + ".tmp")
    os.replace(state_file + ".tmp", state_file)
model.eval()

# (1) ownership on validation clips, with the training noise on the input
n_val = int(os.environ.get("NVAL", "16"))
part = open_split(clips_root, "val")
t = min(part.frames, cfg.clip_frames)
raw = next(iter(part.chunks(("frames", "visible"), n_val, t={"frames": slice(0, t),
                                                             "visible": slice(0, t)})))[1]
side, f = cfg.model.work_size, cfg.model.image_size // cfg.model.work_size
x = torch.from_numpy(raw["frames"]).permute(0, 1, 4, 2, 3).float() / 255  # (N, T, C, 64, 64)
x = F.avg_pool2d(x.flatten(0, 1), f).view(n_val, t, 3, side, side)
vis = torch.from_numpy(raw["visible"]).long()  # (N, T, 64, 64)
onehot = F.one_hot(vis, 4).permute(0, 1, 4, 2, 3).float()  # (N, T, 4, 64, 64): bg, slots
onehot = (F.avg_pool2d(onehot.flatten(0, 1), f) > 0.5).view(n_val, t, 4, side, side)
with torch.no_grad():
    gen = torch.Generator().manual_seed(12345)
    states = model.run(x, gen, inputs=corrupt(x, cfg.noise_prob, gen))
rows = []
for i, (s, (_, t_out)) in enumerate(zip(states, schedule(t, cfg.model.em_steps,
                                                          cfg.model.warmup))):
    g, mu, tgt = s.gamma[:, :, 0], s.mu, x[:, t_out]  # (N, K, H, W), (N, K, C, H, W), (N, C, H, W)
    m = onehot[:, t_out]  # (N, 4, H, W)
    bg_owner = (g * m[:, None, 0]).flatten(2).sum(-1).argmax(1)  # (N,)
    same, own_g, other_g, e_own, e_other, e_prior, pull_n, pull_d, n = (0,) * 8 + (0,)
    for b in range(n_val):
        for sl in range(1, 4):
            px = m[b, sl]  # (H, W) bool
            if px.sum() < 2:
                continue
            mass = g[b][:, px].sum(-1)  # (K,)
            o = int(mass.argmax())
            others = [k for k in range(g.shape[1]) if k != o]
            err = ((mu[b][:, :, px] - tgt[b][:, px][None]) ** 2).sum(1).mean(-1)  # (K,)
            same += int(o == int(bg_owner[b]))
            own_g += float(g[b, o][px].mean())
            other_g += float(g[b, others][:, px].mean(-1).max())
            e_own += float(err[o])
            e_other += float(err[others].min())
            e_prior += float(((s.prior[b, 0, :, 0, 0][:, None] - tgt[b][:, px]) ** 2).sum(0).mean())
            gl = g[b, others][:, px][:, None]  # (K-1, 1, P)
            mul = mu[b, others][:, :, px]  # (K-1, C, P)
            pull_n += float((gl * (mul - tgt[b][:, px][None])).abs().sum())
            go, muo = g[b, o][px][None], mu[b, o][:, px]  # (1, P), (C, P)
            pull_d += float((go * (muo - tgt[b][:, px])).abs().sum())
            n += 1
    if n:
        rows.append(f"step {i} (target {t_out}): shape owner = bg owner {same / n:.2f}, "
                    f"owner gamma {own_g / n:.3f}, best other {other_g / n:.3f}; sq. error "
                    f"owner {e_own / n:.3f}, best other {e_other / n:.3f}, prior {e_prior / n:.3f};"
                    f" pull {pull_n / max(pull_d, 1e-12):.4f}")
print("\n".join(rows), flush=True)

# (2) the score on test pairs
if os.environ.get("SCORE", "1") == "0":
    sys.exit(0)
test = read_checked(test_root, "test", ("frames", "amodal", "visible", "present"), None)
method = RnemMethod()
seg = SegmentationScore(K=cfg.model.num_groups)
for i in range(0, len(test["frames"]), 25):
    fr = test["frames"][i:i + 25]
    img0 = fr[:, 0].transpose(0, 3, 1, 2).astype(np.float32) / 255
    img1 = fr[:, 1].transpose(0, 3, 1, 2).astype(np.float32) / 255
    p = method.predict(model, img0, img1)
    seg.update(p.masks, p.visible, test["amodal"][i:i + 25, 0], test["visible"][i:i + 25, 0],
               test["present"][i:i + 25])
r = seg.compute()
print("steps", step, "visible fixed", json.dumps(r["visible_iou"]), "per image",
      json.dumps(r["visible_iou_per_image"]), flush=True)
