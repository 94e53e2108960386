"""Time a few training steps of a gwm profile on this machine: forward, loss (the closed-form
flow fit), backward and AdamW with the profile's gradient clip, one thread, synthetic frames and
flow at 64 px. Prints wall and CPU seconds per step (CPU seconds: what a core of its own gives).

    python experiments/2026-12-08-gwm-steptime/steptime.py quick 3 12
"""
import sys
import time

import torch

from baselines.gwm import PROFILES, MaskNet
from baselines.gwm.losses import gwm_loss


def main(name: str, warm: int, steps: int) -> None:
    torch.set_num_threads(1)
    cfg = PROFILES[name].replace(model={"image_size": 64})
    torch.manual_seed(0)
    net = MaskNet(cfg.model)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(0)
    b = cfg.loop.batch_size
    frame = torch.rand(b, 3, 64, 64, generator=gen)
    flow = 3 * torch.randn(b, 2, 64, 64, generator=gen)
    for i in range(warm + steps):
        if i == warm:
            t0, c0 = time.perf_counter(), time.process_time()
        loss = gwm_loss(net(frame).masks, flow, flow_model=cfg.flow_model, ridge=cfg.ridge,
                        flow_clip=cfg.flow_clip, criterion=cfg.criterion, w_rec=cfg.w_rec).total
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.loop.grad_clip)
        opt.step()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{name}: batch {b}, K {cfg.model.num_masks}, widths {cfg.model.widths}: "
          f"{wall / steps:.3f} s wall, {cpu / steps:.3f} CPU-s per step over {steps} steps")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
