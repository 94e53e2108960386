"""Train the quick network at the data's side with some changes (VARIANT, comma-separated) for
STEPS steps of BATCH flows on the first STEPS x BATCH training pairs, through the shared loop,
then score the alphas on the first TEST test pairs: visible IoU (fixed, per image), mBO,
FG-ARI, mean largest alpha, alpha entropy, and the slots' and alpha logits' spread over K.

    probe64.py DATA OUT VARIANT STEPS BATCH TEST

VARIANT: `base`, or key=value for any TrainConfig field (warmup_steps=20, lr=...) or ModelConfig
field (num_slots=2, kernel_size=5, flow_unit=0.05), and the flag `noin_dec` (no instance norm
in the decoder).
"""
import dataclasses, json, sys, time
from pathlib import Path
import torch
from torch import nn
from torch.nn import functional as F
import trainloop
from baselines.motiongrouping import ModelConfig, profile
from baselines.motiongrouping.trainer import MotionGroupingTask, load_flow
from benchmark.datasets import read_checked
from benchmark.evaluate import TEST_FIELDS, predict
from benchmark.metrics import AriScore, SegmentationScore
from benchmark.registry import get_method

data, out, variant, steps, batch, ntest = (sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
                                           int(sys.argv[5]), int(sys.argv[6]))
flow = load_flow(data, steps * batch)
size = flow.shape[1]
cfg = profile("quick", out).replace(model={"image_size": size}, max_minutes=None, steps=steps,
                                    batch_size=batch, device="cpu", log_every=10)
model_fields = {f.name: f for f in dataclasses.fields(ModelConfig)}
for kv in variant.split(","):
    if "=" not in kv:
        continue
    key, value = kv.split("=")
    if key in model_fields:
        old = getattr(cfg.model, key)
        cfg = cfg.replace(model={key: type(old)(float(value)) if old is not None else float(value)})
    else:
        cfg = cfg.replace(**{key: type(getattr(cfg, key))(value)})
flags = set(v for v in variant.split(",") if "=" not in v)


class Task(MotionGroupingTask):
    def build(self, device):
        model = super().build(device)
        if "noin_dec" in flags:
            for i, m in enumerate(model.decoder.cnn):
                if isinstance(m, nn.InstanceNorm2d):
                    model.decoder.cnn[i] = nn.Identity()
        return model


def spread(model, flows):
    """Slot cosine and alpha-logit spread over K on flows (B, H, W, 2) pixels."""
    x = flows.float().permute(0, 3, 1, 2)
    with torch.no_grad():
        slots = model.slots(x)  # (B, K, D)
        o = model.decoder(slots.flatten(0, 1)).view(len(x), -1, 3, size, size)
        n = F.normalize(slots, dim=-1)
        c = n @ n.transpose(1, 2)
        k = c.shape[-1]
        cos = ((c.sum((1, 2)) - k) / (k * (k - 1))).mean().item() if k > 1 else 1.0
        return {"slot_cos": round(cos, 3), "logit_std_K": round(o[:, :, 2].std(1).mean().item(), 3),
                "logit_std_px": round(o[:, :, 2].std((2, 3)).mean().item(), 3)}


t = time.monotonic()
print(variant, json.dumps({"steps": steps, "batch": batch, "model": dataclasses.asdict(cfg.model),
                           "warmup": cfg.warmup_steps, "lr": cfg.lr}), flush=True)
model, _ = trainloop.fit(Task(cfg), cfg.loop, (torch.from_numpy(flow),), progress=False)
print(variant, "train wall", round(time.monotonic() - t), "s", flush=True)
model.eval()
method = get_method("motiongrouping")
test = read_checked(Path(data), "test", TEST_FIELDS, ntest)
seg, ari, top, ent = None, AriScore(), [], []
for i in range(0, ntest, 25):
    gt = test["flow"][i:i + 25, 0]
    pred = predict(method, model, test["frames"][i:i + 25], gt)
    seg = seg or SegmentationScore(K=pred.masks.shape[1])
    vis = test["visible"][i:i + 25, 0]
    seg.update(pred.masks, pred.visible, test["amodal"][i:i + 25, 0], vis, test["present"][i:i + 25])
    ari.update(pred.visible, vis)
    a = torch.as_tensor(pred.visible).float()
    top.append(a.max(1).values.mean().item())
    ent.append((-(a * (a + 1e-5).log()).sum(1)).mean().item())
m = {**seg.compute(), **ari.compute()}
res = {k: round(float(m[k]["all"]), 4) for k in ("visible_iou", "visible_iou_per_image", "visible_mbo")}
res["fg_ari"] = round(float(m["fg_ari"]), 4)
res["mean_max_alpha"] = round(sum(top) / len(top), 4)
res["alpha_entropy"] = round(sum(ent) / len(ent), 4)
res.update(spread(model, torch.from_numpy(test["flow"][:64, 0])))
print(variant, json.dumps(res), flush=True)
