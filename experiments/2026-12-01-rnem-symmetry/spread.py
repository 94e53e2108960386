"""How far R-NEM's groups stay apart over a clip's EM steps: gamma's spread over the groups
(std over K, averaged over pixels and clips) after every step, at initialisation and after each
of N Adam updates, with the mean mask and colour. Usage (from the repository root):
  spread.py CLIPS '{"clip_frames": 4, "model": {"sigma": 0.07}}' [N_UPDATES]
"""
import json
import sys

import torch

from baselines.rnem.config import profile
from baselines.rnem.model import RNEM
from baselines.rnem.trainer import clip_loss, load_clips

torch.set_num_threads(1)
root, over = sys.argv[1], json.loads(sys.argv[2])
updates = int(sys.argv[3]) if len(sys.argv) > 3 else 0
cfg = profile("quick", "/tmp/unused").replace(**over)
clip = torch.from_numpy(load_clips(root, cfg.replace(max_clips=8))).float() / 255
torch.manual_seed(0)
model = RNEM(cfg.model)
opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)


def report(tag: str) -> None:
    with torch.no_grad():
        states = model.run(clip, torch.Generator().manual_seed(0))
        colour = torch.sigmoid(model.decoder.colour(states[0].theta.flatten(0, 1))).mean()
    print(f"{tag}: mask {states[0].mask.mean():.3f} colour {colour:.3f} spread per step",
          " ".join(f"{s.gamma.std(1).mean():.4f}" for s in states), flush=True)


report("init")
for i in range(updates):
    total = clip_loss(model, clip, cfg, torch.Generator().manual_seed(100 + i))[0]
    opt.zero_grad()
    total.backward()
    opt.step()
    report(f"after {i + 1}")
