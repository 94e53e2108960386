"""Can the quick broadcast decoder draw a mask where its slot says? The decoder alone, trained
to turn a slot (a learned linear map of a disc's centre and radius, in fractions of the side)
into that disc as its alpha logit (binary cross-entropy), STEPS steps of 32 discs, Adam;
scored by the IoU of logit > 0 against the disc on 256 held-out discs.

    render.py SIDE STEPS [key=value ...]   keys: dec_norm (1: instance norm as the official;
    0: none), kernel_size, decoder_scale, lr (5e-4), seed (0)
"""
import sys, time
import torch
from torch import nn
from torch.nn import functional as F
from baselines.motiongrouping import profile
from baselines.motiongrouping.model import BroadcastDecoder

side, steps = int(sys.argv[1]), int(sys.argv[2])
kv = dict(a.split("=") for a in sys.argv[3:])
torch.set_num_threads(1)
changes = {"image_size": side, "dec_kernel_size": None}  # kernel_size sets the decoder's
for key in ("kernel_size", "decoder_scale"):
    if key in kv:
        changes[key] = int(kv[key])
cfg = profile("quick", "/tmp/x").model.__class__(**{**profile("quick", "/tmp/x").model.__dict__,
                                                    **changes})
torch.manual_seed(int(kv.get("seed", 0)))
dec = BroadcastDecoder(cfg)
if kv.get("dec_norm", "1") == "0":
    for i, m in enumerate(dec.cnn):
        if isinstance(m, nn.InstanceNorm2d):
            dec.cnn[i] = nn.Identity()
embed = nn.Linear(3, cfg.slot_size)
params = list(dec.parameters()) + list(embed.parameters())
opt = torch.optim.Adam(params, lr=float(kv.get("lr", 5e-4)))
gen = torch.Generator().manual_seed(1)
r = (torch.arange(side) + 0.5) / side
yy, xx = torch.meshgrid(r, r, indexing="ij")  # (H, W) each


def discs(n):
    c = 0.15 + 0.7 * torch.rand(n, 2, generator=gen)  # (n, 2) centre (y, x)
    rad = 0.08 + 0.12 * torch.rand(n, 1, generator=gen)  # (n, 1)
    d2 = (yy - c[:, 0, None, None]) ** 2 + (xx - c[:, 1, None, None]) ** 2  # (n, H, W)
    return torch.cat([c, rad], 1), (d2 < rad[..., None] ** 2).float()


def iou(logit, mask):
    p = logit > 0
    inter = (p & mask.bool()).sum((1, 2)).float()
    union = (p | mask.bool()).sum((1, 2)).float()
    return (inter / union.clamp(min=1)).mean().item()


test_x, test_m = discs(256)
t = time.monotonic()
for step in range(1, steps + 1):
    x, m = discs(32)
    logit = dec(embed(x))[:, 2]  # (32, H, W)
    loss = F.binary_cross_entropy_with_logits(logit, m)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % max(1, steps // 4) == 0:
        with torch.no_grad():
            test_iou = iou(dec(embed(test_x))[:, 2], test_m)
        print(f"side {side} {kv} step {step}: loss {loss.item():.4f} test IoU {test_iou:.3f} "
              f"({time.monotonic() - t:.0f} s)", flush=True)
