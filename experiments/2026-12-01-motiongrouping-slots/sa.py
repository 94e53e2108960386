"""Inside Slot Attention (quick network at the data's side, CKPT or untrained): how different
are its inputs across positions, and how do the slots and the attention evolve over the
iterations, on the first 64 training flows of DATA?

    sa.py DATA [CKPT]
"""
import dataclasses, sys
import torch
from torch.nn import functional as F
from baselines.motiongrouping import MotionGrouping, checkpoint, profile
from baselines.motiongrouping.trainer import load_flow

flow = torch.from_numpy(load_flow(sys.argv[1], 64)).float().permute(0, 3, 1, 2)  # (B, 2, H, W)
torch.manual_seed(0)
cfg = dataclasses.replace(profile("quick", "/tmp/x").model, image_size=flow.shape[-1])
model = checkpoint.load(sys.argv[2]) if len(sys.argv) > 2 else MotionGrouping(cfg)
model.eval()
sa = model.slot_attention


def mean_offdiag_cos(x):  # x (B, M, D) -> mean cosine between different rows
    x = F.normalize(x, dim=-1)
    c = x @ x.transpose(1, 2)  # (B, M, M)
    m = c.shape[-1]
    return ((c.sum((1, 2)) - m) / (m * (m - 1))).mean().item()


with torch.no_grad():
    feats = model.encoder(flow)  # (B, N, D)
    x = sa.norm_inputs(feats)
    k, v = sa.k(x), sa.v(x)
    moving = F.max_pool2d(flow.norm(dim=1, keepdim=True), 4).flatten(1) > 0.05  # (B, N)
    print(f"inputs: cos between positions {mean_offdiag_cos(x):.3f}; k {mean_offdiag_cos(k):.3f}; "
          f"moving cells {moving.float().mean():.3f}")
    xc = x - x.mean(1, keepdim=True)
    print(f"inputs: centred norm / norm {xc.norm(dim=-1).mean() / x.norm(dim=-1).mean():.3f}")
    slots = model.initial_slots(len(flow))
    for it in range(sa.iters):
        prev = slots
        q = sa.q(sa.norm_slots(slots))
        logits = torch.einsum("bkd,bnd->bkn", q, k) * sa.scale
        attn = logits.softmax(1)
        w = (attn + sa.eps) / (attn + sa.eps).sum(-1, keepdim=True)
        upd = torch.einsum("bkn,bnd->bkd", w, v)
        b, n_s, d = slots.shape
        slots = sa.gru(upd.reshape(-1, d), prev.reshape(-1, d)).view(b, n_s, d)
        slots = slots + sa.mlp(sa.norm_mlp(slots))
        print(f"iter {it}: logits std over K {logits.std(1).mean():.3f}, max share "
              f"{attn.max(1).values.mean():.3f}, slot cos {mean_offdiag_cos(slots):.3f}, "
              f"update cos {mean_offdiag_cos(upd):.3f}")
