"""CPU-seconds per training step of the quick network at 64 px, batch 32, one thread."""
import time, torch
from baselines.motiongrouping import PROFILES, MotionGrouping
from baselines.motiongrouping.losses import mg_loss
torch.set_num_threads(1); torch.set_flush_denormal(True)
torch.manual_seed(0)
for name in ("quick",):
    m = MotionGrouping(PROFILES[name].model); opt = torch.optim.Adam(m.parameters(), 5e-4)
    x = torch.randn(32, 2, 64, 64) * 2
    ts = []
    for i in range(3):
        c, w = time.process_time(), time.perf_counter()
        out = m(x); loss = mg_loss(out.flow, x, out.alphas, w_recon=100, w_entropy=.01, eps=1e-5).total
        opt.zero_grad(); loss.backward(); opt.step()
        ts.append((time.process_time() - c, time.perf_counter() - w))
    cpu = min(t[0] for t in ts[1:])
    print(name, f"{cpu:.2f} CPU-s/step, {32 / cpu:.1f} pairs per CPU-second; wall {[round(t[1], 1) for t in ts]}", flush=True)
