"""How much of the broadcast decoder's activations depends on the slot, layer by layer? The
quick decoder at initialisation (torch seed 0) at image side SIDE, fed 256 slots drawn
N(0, 1) (the scale of the learned initial slots): after each instance norm (or where it would
be) and at the alpha logits, the part of the activations that changes with the slot, its
variance split into what is constant over the image, what repeats with the broadcast cell
(the mean over pixels of the same phase within their cells of side / g pixels, less the
constant), and the rest: only the rest can put a mask in one place rather than another.

    slotshare.py SIDE [key=value ...]   keys: dec_norm (1; 0: none; first0: not the first),
    kernel_size, decoder_scale
"""
import sys
import torch
from torch import nn
from baselines.motiongrouping import profile
from baselines.motiongrouping.model import BroadcastDecoder

side = int(sys.argv[1])
kv = dict(a.split("=", 1) for a in sys.argv[2:])
torch.set_num_threads(1)
base = profile("quick", "/tmp/x").model
changes = {"image_size": side, "dec_kernel_size": None}  # kernel_size sets the decoder's
for key in ("kernel_size", "decoder_scale"):
    if key in kv:
        changes[key] = int(kv[key])
cfg = base.__class__(**{**base.__dict__, **changes})
torch.manual_seed(0)
dec = BroadcastDecoder(cfg).eval()
norms = [i for i, m in enumerate(dec.cnn) if isinstance(m, nn.InstanceNorm2d)]
for i in {"0": norms, "first0": norms[:1]}.get(kv.get("dec_norm", "1"), []):
    dec.cnn[i] = nn.Identity()
slots = torch.randn(256, cfg.slot_size, generator=torch.Generator().manual_seed(1))


def shares(x, cell):
    """x (S, C, h, w) -> the slot-dependent part's variance split three ways: constant over
    the image, periodic with the broadcast cell (less the constant), and the rest."""
    dep = x - x.mean(0, keepdim=True)  # (S, C, h, w) the slot-dependent part
    s, c, h, w = dep.shape
    dc = dep.mean((2, 3), keepdim=True)  # (S, C, 1, 1)
    cells = (dep - dc).reshape(s, c, h // cell, cell, w // cell, cell)
    phase = cells.mean((2, 4), keepdim=True).expand_as(cells).reshape_as(dep)
    total = dep.pow(2).mean(0).sum()
    return [(v.pow(2).mean(0).sum() * (h * w if v is dc else 1) / total).item()
            for v in (dc, phase, dep - dc - phase)]


with torch.no_grad():
    g = dec.side
    grid = slots[:, None, None, :].expand(-1, g, g, -1)  # (S, g, g, D)
    x = dec.pos(grid).permute(0, 3, 1, 2).contiguous()  # (S, D, g, g)
    names = [type(m).__name__ for m in dec.cnn]
    out = []
    for i, m in enumerate(dec.cnn):
        x = m(x)
        if names[i] in ("InstanceNorm2d", "Identity") or i == len(dec.cnn) - 1:
            cell = x.shape[-1] // g
            const, per, rest = shares(x if i < len(dec.cnn) - 1 else x[:, 2:], cell)
            out.append(f"{'logit' if i == len(dec.cnn) - 1 else f'norm{len(out) + 1}'} "
                       f"{x.shape[-1]}px const {const:.2f} periodic {per:.2f} rest {rest:.2f}")
print(f"side {side} {kv}: " + " | ".join(out), flush=True)
