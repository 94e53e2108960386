"""Short R-NEM probe: the quick profile with overrides for some minutes or steps, logging how
far the groups are apart (gmax: gamma's largest value, gstd: its spread over the groups, both
averaged over the pixels of the last step; groups: as the trainer's log), then gamma scored on
test pairs. Usage (from the repository root, EVERY=10 logs every 10th step):
  probe.py CLIPS TEST MINUTES '{"model": {...}, "batch_size": 8}' [SEED [MAX_STEPS]]
"""
import json
import os
import sys
import time

import numpy as np
import torch

from baselines.rnem.config import profile
from baselines.rnem.model import RNEM
from baselines.rnem.trainer import clip_loss, groups_used, load_clips
from benchmark.metrics import SegmentationScore
from benchmark.datasets import read_checked
from benchmark.methods.rnem import RnemMethod

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
              f"gmax {g.max(1).values.mean().item():.3f} gstd {g.std(1).mean().item():.4f}",
              flush=True)

model.eval()
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
