"""Wall seconds a training step of the quick network (Adam, the profile's loss) at each batch
size, one thread, on the first training flows of DATA; after two untimed steps, the median of
REPS.

    steptime.py DATA REPS BATCH [BATCH ...]
"""
import statistics, sys, time
import torch
from baselines.motiongrouping import profile
from baselines.motiongrouping.losses import mg_loss
from baselines.motiongrouping.model import MotionGrouping
from baselines.motiongrouping.trainer import load_flow

torch.set_num_threads(1)
data, reps, batches = sys.argv[1], int(sys.argv[2]), [int(b) for b in sys.argv[3:]]
cfg = profile("quick", "unused")
flow = torch.from_numpy(load_flow(data, max(batches))).float().permute(0, 3, 1, 2)  # (N, 2, H, W)
unit = cfg.model.unit_pixels
for b in batches:
    torch.manual_seed(0)
    model = MotionGrouping(cfg.model).train()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    x, times = flow[:b].contiguous(), []
    for i in range(2 + reps):
        t = time.perf_counter()
        out = model(x)
        loss = mg_loss(out.flow / unit, x / unit, out.alphas, w_recon=cfg.w_recon,
                       w_entropy=cfg.w_entropy, eps=cfg.entropy_eps).total
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
    s = statistics.median(times[2:])
    print(f"batch {b}: {s:.3f} s a step, {b / s:.1f} pairs/s", flush=True)
