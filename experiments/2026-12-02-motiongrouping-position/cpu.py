"""CPU-seconds per training step of the quick network at 64 px, batch 32, one thread, synthetic
flow: its decoder with 3x3 kernels (before) and with 5x5 (the quick profile now)."""
import dataclasses, time, torch
from baselines.motiongrouping import PROFILES, MotionGrouping
from baselines.motiongrouping.losses import mg_loss
torch.set_num_threads(1); torch.set_flush_denormal(True)
for k in (3, 5):
    torch.manual_seed(0)
    m = MotionGrouping(dataclasses.replace(PROFILES["quick"].model, dec_kernel_size=k))
    opt = torch.optim.Adam(m.parameters(), 5e-4)
    x = torch.randn(32, 2, 64, 64) * 2
    ts = []
    for i in range(4):
        c = time.process_time()
        out = m(x); loss = mg_loss(out.flow, x, out.alphas, w_recon=100, w_entropy=.01, eps=1e-5).total
        opt.zero_grad(); loss.backward(); opt.step()
        ts.append(time.process_time() - c)
    cpu = min(ts[1:])
    print(f"decoder {k}x{k}: {cpu:.2f} CPU-s/step, {32 / cpu:.1f} pairs per CPU-second", flush=True)
