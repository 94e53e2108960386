"""Step time of one quick-profile rank with and without the encoder's GroupNorm.

Full training steps (loss, backward, Adam) at batch 16, 64 px, bf16 autocast, one thread, on a
random image and its copy shifted 2 px; the median of steps 9-25.

    python step_cost.py ENC_NORM COMPILE(0|1)
"""
import statistics
import sys
import time

import torch

from flowcaps import PROFILES
from flowcaps.losses import pair_loss
from flowcaps.model import FlowCapsules

torch.set_num_threads(1)
norm, compiled = int(sys.argv[1]), sys.argv[2] == "1"
cfg = PROFILES["quick"]().replace(model={"enc_norm": norm}, bf16=True)
torch.manual_seed(0)
model = FlowCapsules(cfg.model)
opt = torch.optim.Adam(model.parameters(), 1e-3)


def step(a, b, gen):
    return pair_loss(model, a, b, cfg, gen).total


f = torch.compile(step) if compiled else step
gen = torch.Generator().manual_seed(0)
a = torch.rand(16, 3, 64, 64, generator=torch.Generator().manual_seed(0))  # (B, 3, H, W)
b = torch.roll(a, 2, -1)  # (B, 3, H, W)
times = []
for _ in range(25):
    t = time.perf_counter()
    loss = f(a, b, gen)
    opt.zero_grad()
    loss.backward()
    opt.step()
    times.append(time.perf_counter() - t)
ms = statistics.median(times[8:]) * 1000
print(f"enc_norm={norm} compile={compiled}: {ms:.1f} ms a step, {16000 / ms:.0f} pairs/s")
