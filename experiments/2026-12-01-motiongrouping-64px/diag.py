"""Seconds-long diagnostic: the quick network at the data's side, at initialisation and after
STEPS steps of BATCH flows (Adam, the profile's warm-up unless WARMUP is given): how different
are the slots after Slot Attention (across K), the attention, and the decoder's alpha logits
(across slots and across pixels), on 64 held-out training flows of DATA?

    diag.py DATA STEPS BATCH [key=value ...]   (keys: warmup_steps, lr, flow_unit, num_slots, seed)
"""
import sys, time
import torch
from torch.nn import functional as F
from baselines.motiongrouping import MotionGrouping, profile
from baselines.motiongrouping.losses import mg_loss
from baselines.motiongrouping.trainer import load_flow, lr_factor

data, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kv = dict(a.split("=") for a in sys.argv[4:])
torch.set_num_threads(1)
flow_all = torch.from_numpy(load_flow(data, 64 + steps * batch)).float().permute(0, 3, 1, 2)
probe, train = flow_all[:64], flow_all[64:]  # (64, 2, H, W), (steps B, 2, H, W)
side = flow_all.shape[-1]
model_changes = {"image_size": side}
for key in ("flow_unit", "num_slots"):
    if key in kv:
        model_changes[key] = type(getattr(profile("quick", "/tmp/x").model, key))(kv[key])
cfg = profile("quick", "/tmp/x").replace(model=model_changes, batch_size=batch)
for key in ("warmup_steps", "lr"):
    if key in kv:
        cfg = cfg.replace(**{key: type(getattr(cfg, key))(kv[key])})
torch.manual_seed(int(kv.get("seed", 0)))
model = MotionGrouping(cfg.model)


def cos_offdiag(x):  # (B, K, D) -> mean cosine between different slots
    x = F.normalize(x, dim=-1)
    c = x @ x.transpose(1, 2)
    k = c.shape[-1]
    return ((c.sum((1, 2)) - k) / (k * (k - 1))).mean().item()


def report(tag):
    model.eval()
    with torch.no_grad():
        unit = model.config.unit_pixels
        feats = model.encoder(probe / unit)  # (B, N, D)
        slots, attn = model.slot_attention(feats, model.initial_slots(len(probe)))
        out = model.decoder(slots.flatten(0, 1)).view(len(probe), -1, 3, side, side)
        logit = out[:, :, 2]  # (B, K, H, W)
        alphas = logit.softmax(1)
        ent = -(alphas * (alphas + 1e-5).log()).sum(1).mean().item()
        slot_spread = (slots.std(1).mean() / slots.std((0, 1)).mean()).item()
        print(f"{tag}: slot cos {cos_offdiag(slots):.3f}, slot std over K / overall "
              f"{slot_spread:.3f}, attn max share {attn.max(1).values.mean():.3f}, "
              f"logit std over K {logit.std(1).mean():.4f}, over pixels "
              f"{logit.std((2, 3)).mean():.4f}, layer std over K "
              f"{out[:, :, :2].std(1).mean():.4f}, alpha entropy {ent:.4f}", flush=True)
    model.train()


report(f"{side}px init")
opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
t = time.monotonic()
for step in range(steps):
    for g in opt.param_groups:
        g["lr"] = cfg.lr * lr_factor(step, cfg)
    x = train[step * batch:(step + 1) * batch]
    out = model(x)
    unit = model.config.unit_pixels
    terms = mg_loss(out.flow / unit, x / unit, out.alphas, w_recon=cfg.w_recon,
                    w_entropy=cfg.w_entropy, eps=cfg.entropy_eps)
    opt.zero_grad()
    terms.total.backward()
    opt.step()
    if (step + 1) % 25 == 0 or step + 1 == steps:
        print(f"step {step + 1} recon {terms.recon.item():.4f} entropy {terms.entropy.item():.4f} "
              f"({time.monotonic() - t:.0f} s)", flush=True)
report(f"{side}px after {steps}")
