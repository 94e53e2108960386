"""Where does the input get lost at 64 px? The quick network at the data's side, at
initialisation and every EVERY steps of training (batch BATCH, Adam, the profile's loss and
schedule), measured stage by stage on 64 held-out training flows:

- `feat`: the encoder's tokens (the Slot Attention's normed inputs), the share of their
  variance that changes with the image (`img`) rather than with the position alone
  (the variance over positions of the mean over images), and how far moving tokens sit from
  static ones (`mv`: distance of the two means over the tokens' spread);
- `attn`: the last iteration's attention (B, K, N): its share that changes with the image, and
  the largest correlation of one slot's map with the moving tokens (`mcorr`);
- `slot`: the slots' variance over images over their total (over images and slots);
- `alpha`: the alpha logits (B, K, H, W): share that changes with the image, the largest
  correlation of a slot's alpha with the moving pixels, and the alphas' entropy.

    stages.py DATA STEPS EVERY [key=value ...]
keys: batch (16), warmup_steps (200), lr, seed (0), kernel_size, decoder_scale, dec_norm
(1; 0: none in the decoder; first0: not the first), pos (1: both embeddings; 0: none; enc / dec: only that one), enc (encoder widths,
32-64-64-64), dec_grid (the broadcast grid's side; its decoder draws at 8 x that, then is
upsampled), dec_kernel (the decoder's kernel size only), png (a picture of 6 probe flows' alphas after training).
"""
import sys, time
import torch
from torch import nn
from torch.nn import functional as F
from baselines.motiongrouping import MotionGrouping, profile
from baselines.motiongrouping.losses import mg_loss
from baselines.motiongrouping.model import BroadcastDecoder
from baselines.motiongrouping.trainer import load_flow, lr_factor

data, steps, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kv = dict(a.split("=", 1) for a in sys.argv[4:])
torch.set_num_threads(1)
batch = int(kv.get("batch", 16))
flow_all = torch.from_numpy(load_flow(data, 64 + steps * batch)).float().permute(0, 3, 1, 2)
probe, train = flow_all[:64], flow_all[64:]  # (64, 2, H, W), (steps B, 2, H, W) pixels
side = flow_all.shape[-1]
changes = {"image_size": side, "dec_kernel_size": None}  # the quick network before the fix
for key in ("kernel_size", "decoder_scale"):
    if key in kv:
        changes[key] = int(kv[key])
if "enc" in kv:  # encoder widths, e.g. 32-64-64-64: one 2x2 pool fewer or more
    changes["enc_channels"] = tuple(int(c) for c in kv["enc"].split("-"))
cfg = profile("quick", "/tmp/x").replace(model=changes, batch_size=batch,
                                         warmup_steps=int(kv.get("warmup_steps", 200)),
                                         lr=float(kv.get("lr", 5e-4)))
torch.manual_seed(int(kv.get("seed", 0)))
model = MotionGrouping(cfg.model)
if "dec_grid" in kv:  # broadcast to a dec_grid x dec_grid grid, upsampled to side / scale
    g, scale = int(kv["dec_grid"]), cfg.model.decoder_scale
    small = cfg.model.__class__(**{**cfg.model.__dict__, "image_size": g * 8, "decoder_scale": 1})
    model.decoder = BroadcastDecoder(small)
    model.decoder.image_size = side
if "dec_kernel" in kv:  # the decoder's kernels only (the encoder keeps kernel_size)
    model.decoder = BroadcastDecoder(cfg.model.__class__(**{**cfg.model.__dict__,
                                                            "kernel_size": int(kv["dec_kernel"])}))
pos = kv.get("pos", "1")
for name, emb in (("enc", model.encoder.pos), ("dec", model.decoder.pos)):
    if pos == "0" or (pos in ("enc", "dec") and pos != name):
        nn.init.zeros_(emb.proj.weight), nn.init.zeros_(emb.proj.bias)
        emb.proj.requires_grad_(False)
norms = [i for i, m in enumerate(model.decoder.cnn) if isinstance(m, nn.InstanceNorm2d)]
for i in {"0": norms, "first0": norms[:1]}.get(kv.get("dec_norm", "1"), []):
    model.decoder.cnn[i] = nn.Identity()
unit = model.config.unit_pixels
moving_px = (probe.norm(dim=1) > 0.05).float()  # (B, H, W)
cell = side // model.encoder.pos.grid.shape[0]
moving_tok = (F.max_pool2d(moving_px[:, None], cell).flatten(1) > 0).float()  # (B, N)


def img_share(x):
    """x (B, P, C): variance over images / (that + variance over positions of the mean)."""
    over_img = x.var(0).sum(-1).mean()
    over_pos = x.mean(0).var(0).sum()
    return (over_img / (over_img + over_pos)).item()


def max_corr(maps, mask):
    """maps (B, K, P), mask (B, P): the largest Pearson correlation of one slot's map with
    the mask over all images and positions."""
    m = mask.flatten() - mask.mean()
    best = -1.0
    for k in range(maps.shape[1]):
        a = maps[:, k].flatten()
        a = a - a.mean()
        best = max(best, (a @ m / (a.norm() * m.norm() + 1e-12)).item())
    return best


def report(tag):
    model.eval()
    with torch.no_grad():
        feats = model.encoder(probe / unit)  # (B, N, D)
        sa = model.slot_attention
        x = sa.norm_inputs(feats)
        mv = moving_tok.bool()
        gap = (x[mv].mean(0) - x[~mv].mean(0)).norm() / x.reshape(-1, x.shape[-1]).std(0).norm()
        slots, attn = sa(feats, model.initial_slots(len(probe)))  # (B, K, D), (B, K, N)
        out = model.decoder(slots.flatten(0, 1)).view(len(probe), -1, 3, side, side)
        logit = out[:, :, 2]  # (B, K, H, W)
        a = logit.softmax(1)
        s_img = slots.var(0).sum(-1).mean() / slots.flatten(0, 1).var(0).sum()
        ent = -(a * (a + 1e-5).log()).sum(1).mean().item()
        print(f"{tag}: feat img {img_share(x):.3f} mv {gap:.2f} | attn img "
              f"{img_share(attn.transpose(1, 2)):.3f} mcorr {max_corr(attn, moving_tok):.3f} | "
              f"slot img {s_img:.3f} | alpha img {img_share(logit.flatten(2).transpose(1, 2)):.3f} "
              f"mcorr {max_corr(a.flatten(2), moving_px.flatten(1)):.3f} "
              f"entropy {ent:.3f}", flush=True)
    model.train()


report(f"{side}px step 0")
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
t = time.monotonic()
for step in range(steps):
    for g in opt.param_groups:
        g["lr"] = cfg.lr * lr_factor(step, cfg)
    x = train[step * batch:(step + 1) * batch]
    out = model(x)
    terms = mg_loss(out.flow / unit, x / unit, out.alphas, w_recon=cfg.w_recon,
                    w_entropy=cfg.w_entropy, eps=cfg.entropy_eps)
    opt.zero_grad()
    terms.total.backward()
    opt.step()
    if (step + 1) % every == 0:
        print(f"  recon {terms.recon.item():.4f} entropy {terms.entropy.item():.4f} "
              f"({time.monotonic() - t:.0f} s)", flush=True)
        report(f"{side}px step {step + 1}")

if "png" in kv:  # rows: 6 probe flows; columns: |flow|, then each slot's alpha (white = 1)
    import numpy as np
    from PIL import Image
    model.eval()
    with torch.no_grad():
        a = model(probe[:6]).alphas  # (6, K, H, W)
    speed = probe[:6].norm(dim=1)  # (6, H, W)
    cols = [speed / speed.amax((1, 2), keepdim=True).clamp(min=1e-6)] + list(a.unbind(1))
    grid = torch.cat([torch.cat(list(c), 0) for c in cols], 1)  # (6 H, (K + 1) W)
    img = Image.fromarray((grid.clamp(0, 1).numpy() * 255).astype(np.uint8))
    img.resize((img.width * 2, img.height * 2), Image.NEAREST).save(kv["png"])
