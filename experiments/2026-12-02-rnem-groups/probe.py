"""Who owns Geo's shapes in a short R-NEM training run: the quick profile with overrides for
some minutes or updates; every DIAG updates (and at the end) the ownership of 16 validation
clips with the training noise, at frame 0's read step and at the last step; at the end gamma
scored on test pairs (visible IoU, fixed assignment and per image). Usage (from the repository
root; EVERY=10 logs the loss every 10th update, DIAG=25, SCORE=0 skips the score, TESTN=200
scores the first 200 test pairs; SWITCH='N {"e_epsilon": 1e-6}' changes model settings from
update N on, the loss's sigma too; the trainer's `early_updates` switches the E-step alone):
  probe.py CLIPS TEST MINUTES '{"model": {...}, "batch_size": 8}' [SEED [MAX_STEPS]]

Ownership, per image and shape (its visible pixels at the step's target frame): the owner is
the component with the most gamma on them; the background group (with `background_group`) is
component "bg", the learned groups 0..K-1. Printed: `bg->` which component owns the background
(bg: the fixed group; own: a learned group), `same` how often a shape's owner is the
background's, `distinct` the fraction of images whose present shapes have pairwise different
learned owners, the owner's mean gamma on its shape and the best other learned group's, and
`pull`: the other learned groups' intra-term gradient on the shape against the owner's,
sum |gamma (mu - x)| (~0: only the owner learns the shape).
"""
import json
import os
import sys
import time

import numpy as np
import torch
from torch.nn import functional as F

from baselines.rnem.config import profile
from baselines.rnem.model import RNEM, read_step, schedule
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
m = cfg.model
clips = torch.from_numpy(load_clips(clips_root, cfg))
print("clips", tuple(clips.shape), "cfg", json.dumps(over), "seed", seed, flush=True)
torch.manual_seed(seed)
model = RNEM(m).train()
every, diag_every = int(os.environ.get("EVERY", "10")), int(os.environ.get("DIAG", "25"))
opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)

# validation clips and their visible masks at the work side
n_val = 16
part = open_split(clips_root, "val")
t_val = min(part.frames, cfg.clip_frames)
raw = next(iter(part.chunks(("frames", "visible"), n_val, t={"frames": slice(0, t_val),
                                                             "visible": slice(0, t_val)})))[1]
side, f = m.work_size, m.image_size // m.work_size
xv = torch.from_numpy(raw["frames"]).permute(0, 1, 4, 2, 3).float() / 255  # (N, T, C, 64, 64)
xv = F.avg_pool2d(xv.flatten(0, 1), f).view(n_val, t_val, 3, side, side)
vis = torch.from_numpy(raw["visible"]).long()  # (N, T, 64, 64)
onehot = F.one_hot(vis, 4).permute(0, 1, 4, 2, 3).float()  # (N, T, 4, 64, 64): bg, slots
onehot = (F.avg_pool2d(onehot.flatten(0, 1), f) > 0.5).view(n_val, t_val, 4, side, side)


def ownership(tag: str) -> None:
    model.eval()
    with torch.no_grad():
        gen = torch.Generator().manual_seed(12345)
        states = model.run(xv, gen, inputs=corrupt(xv, cfg.noise_prob, gen),
                           estep=cfg.estep_at(step))  # the E-step of the coming update
    model.train()
    steps = schedule(t_val, m.em_steps, m.warmup)
    for i in sorted({read_step(m), len(states) - 1}):
        s, t_out = states[i], steps[i][1]
        g = s.gamma[:, :, 0]  # (N, K, H, W) learned groups
        bg_g = 1 - g.sum(1, keepdim=True)  # (N, 1, H, W): the fixed group's (0 without it)
        mu, tgt, msk = s.mu, xv[:, t_out], onehot[:, t_out]
        bg_px = msk[:, 0]  # (N, H, W)
        bg_by_fixed = 0
        c = dict(same=0, own=0.0, other=0.0, pn=0.0, pd=0.0, n=0, distinct=0, imgs=0,
                 to_bg=0)
        for b in range(n_val):
            learned_bg = g[b][:, bg_px[b]].sum(-1)  # (K,)
            fixed_bg = float(bg_g[b, 0][bg_px[b]].sum())
            bg_owner = -1 if m.background_group and fixed_bg > learned_bg.max() else int(
                learned_bg.argmax())
            bg_by_fixed += bg_owner == -1
            owners = []
            for sl in range(1, 4):
                px = msk[b, sl]
                if px.sum() < 2:
                    continue
                mass = g[b][:, px].sum(-1)  # (K,)
                o = int(mass.argmax())
                fixed_wins = m.background_group and float(bg_g[b, 0][px].sum()) > mass.max()
                c["to_bg"] += int(fixed_wins)
                owner = -1 if fixed_wins else o
                owners.append(owner)
                others = [k for k in range(g.shape[1]) if k != o]
                c["same"] += int(owner == bg_owner)
                c["own"] += float(g[b, o][px].mean())
                c["other"] += float(g[b, others][:, px].mean(-1).max())
                gl, mul = g[b, others][:, px][:, None], mu[b, others][:, :, px]  # (K-1, 1|C, P)
                c["pn"] += float((gl * (mul - tgt[b][:, px][None])).abs().sum())
                c["pd"] += float((g[b, o][px][None] * (mu[b, o][:, px] - tgt[b][:, px])
                                  ).abs().sum())
                c["n"] += 1
            if len(owners) > 1:
                c["imgs"] += 1
                c["distinct"] += int(-1 not in owners and len(set(owners)) == len(owners))
        n = max(c["n"], 1)
        print(f"  {tag} step {i} (target {t_out}): bg->{'bg' if m.background_group else 'own'}"
              f" {bg_by_fixed / n_val:.2f}; shapes to the bg group {c['to_bg'] / n:.2f}; same "
              f"{c['same'] / n:.2f}; distinct {c['distinct'] / max(c['imgs'], 1):.2f}; owner "
              f"gamma {c['own'] / n:.3f}, best other {c['other'] / n:.3f}; pull "
              f"{c['pn'] / max(c['pd'], 1e-12):.3f}; groups {groups_used(s.gamma):.2f}",
              flush=True)


switch = os.environ.get("SWITCH")
switch_at, switch_to = (int(switch.split(" ", 1)[0]), json.loads(switch.split(" ", 1)[1])
                        ) if switch else (None, None)
t0, step = time.time(), 0
ownership("init")
while time.time() - t0 < minutes * 60 and step < max_steps:
    if step == switch_at:  # the E-step and the loss read these from the config
        cfg = cfg.replace(model=switch_to)
        m = model.config = cfg.model
        print("switched to", json.dumps(switch_to), "at update", step, flush=True)
        ownership(f"switched {step}")
    gen = torch.Generator().manual_seed(seed * 1000003 + step)
    idx = torch.randint(len(clips), (cfg.batch_size,), generator=gen)
    clip = clips[idx].float() / 255
    total, intra, inter, gamma = clip_loss(model, clip, cfg, gen, step)
    opt.zero_grad(set_to_none=True)
    total.backward()
    opt.step()
    step += 1
    if step % every == 0 or step == 1:
        g = gamma.detach()
        print(f"step {step} t {time.time() - t0:.0f}s loss {total.item():.1f} intra "
              f"{intra.item():.1f} inter {inter.item():.1f} groups {groups_used(g):.2f} "
              f"gmax {g.max(1).values.mean().item():.3f} gstd {g.std(1).mean().item():.4f}",
              flush=True)
    if step % diag_every == 0 or step == cfg.early_updates:
        ownership(f"update {step}")
if step % diag_every:
    ownership(f"update {step}")
if os.environ.get("SCORE", "1") == "0":
    sys.exit(0)
model.eval()
test = read_checked(test_root, "test", ("frames", "amodal", "visible", "present"),
                    int(os.environ.get("TESTN", "200")))
method, seg = RnemMethod(), SegmentationScore(K=m.num_groups)
for i in range(0, len(test["frames"]), 25):
    fr = test["frames"][i:i + 25]
    img0 = fr[:, 0].transpose(0, 3, 1, 2).astype(np.float32) / 255
    img1 = fr[:, 1].transpose(0, 3, 1, 2).astype(np.float32) / 255
    p = method.predict(model, img0, img1)
    seg.update(p.masks, p.visible, test["amodal"][i:i + 25, 0], test["visible"][i:i + 25, 0],
               test["present"][i:i + 25])
r = seg.compute()
print("steps", step, f"t {time.time() - t0:.0f}s visible fixed", json.dumps(r["visible_iou"]),
      "per image", json.dumps(r["visible_iou_per_image"]), flush=True)
