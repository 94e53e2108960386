"""At initialisation (or of the checkpoint CKPT) (quick network, 32 px): how much do the slots, the alpha logits and the
flow layers differ from slot to slot, on the first 64 training flows of DATA?"""
import sys
import torch
from baselines.motiongrouping import MotionGrouping, profile
from baselines.motiongrouping.trainer import load_flow

data, size = sys.argv[1], int(sys.argv[2])
flow = torch.from_numpy(load_flow(data, 64)).float().permute(0, 3, 1, 2)  # (B, 2, H, W)
print("flow |v| px: mean", flow.norm(dim=1).mean().item(), "max", flow.norm(dim=1).amax().item(),
      "moving fraction", (flow.norm(dim=1) > 0.05).float().mean().item())
torch.manual_seed(0)
cfg = profile("quick", "/tmp/x").model
import dataclasses
model = MotionGrouping(dataclasses.replace(cfg, image_size=size)).eval()
if len(sys.argv) > 3:  # a trained checkpoint instead
    from baselines.motiongrouping import checkpoint
    model = checkpoint.load(sys.argv[3]).eval()
with torch.no_grad():
    feats = model.encoder(flow)  # (B, N, D)
    print("encoder: std over positions / std over batch", feats.std(1).mean().item(), feats.std(0).mean().item())
    slots, attn = model.slot_attention(feats, model.initial_slots(len(flow)))
    print("slots: std over K", slots.std(1).mean().item(), "norm", slots.norm(dim=-1).mean().item())
    print("attn: max share mean", attn.max(1).values.mean().item(), "share per slot", attn.mean((0, 2)).tolist())
    print("slot pairwise cos", torch.nn.functional.normalize(slots, dim=-1) @ torch.nn.functional.normalize(slots, dim=-1).transpose(1, 2)[0:1].mean(0))
    init = model.initial_slots(1)[0]
    print("init pairwise cos", torch.nn.functional.normalize(init, dim=-1) @ torch.nn.functional.normalize(init, dim=-1).T)
    out = model.decoder(slots.flatten(0, 1)).view(len(flow), -1, 3, size, size)
    logit = out[:, :, 2]
    print("alpha logits: std over K", logit.std(1).mean().item(), "std over pixels", logit.std((2, 3)).mean().item())
    lay = out[:, :, :2]
    print("layers: std over K", lay.std(1).mean().item(), "std over pixels", lay.std((3, 4)).mean().item())
    # the decoder alone: two random slot vectors 10x apart
    s = torch.randn(1, cfg.slot_size)
    o = model.decoder(torch.cat([s, 10 * s, -s]))
    print("decoder(s) vs decoder(10 s) vs decoder(-s) logits", (o[0, 2] - o[1, 2]).abs().mean().item(), (o[0, 2] - o[2, 2]).abs().mean().item(), o[0, 2].std().item())
