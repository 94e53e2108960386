"""Train the quick network at the data's side with one change (VARIANT) for STEPS steps (0: score OUT/model.pt again) of
BATCH flows, then score the alphas on the first TEST test pairs: visible IoU (fixed, per
image), FG-ARI, the mean largest alpha per pixel.

    probe.py DATA OUT VARIANT STEPS BATCH TEST
"""
import json, sys, time
from pathlib import Path
import torch
from torch import nn
import trainloop
from baselines.motiongrouping import profile
from baselines.motiongrouping.trainer import MotionGroupingTask, load_flow
from benchmark.datasets import read_checked
from benchmark.evaluate import TEST_FIELDS, predict
from benchmark.metrics import AriScore, SegmentationScore
from benchmark.registry import get_method

data, out, variant, steps, batch, ntest = (sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
                                           int(sys.argv[5]), int(sys.argv[6]))
flow = load_flow(data)
size = flow.shape[1]
cfg = profile("quick", out).replace(model={"image_size": size}, max_minutes=None, steps=steps,
                                    batch_size=batch, device="cpu", log_every=10)
changes = dict(kv.split("=") for kv in variant.split(",") if "=" in kv)
for key, value in changes.items():
    if key in ("lr", "w_entropy", "w_recon", "warmup_steps"):
        cfg = cfg.replace(**{key: type(getattr(cfg, key))(value)})
flags = set(v for v in variant.split(",") if "=" not in v)


class Task(MotionGroupingTask):
    def build(self, device):
        model = super().build(device)
        if "noin_dec" in flags:  # no instance norm in the decoder
            for i, m in enumerate(model.decoder.cnn):
                if isinstance(m, nn.InstanceNorm2d):
                    model.decoder.cnn[i] = nn.Identity()
        if "out_scale" in changes:  # the decoder's flow layers in units of out_scale pixels
            factor, forward = float(changes["out_scale"]), model.decoder.forward
            unit = torch.tensor([factor, factor, 1.0])[:, None, None]
            model.decoder.forward = lambda s: forward(s) * unit
        return model

    def step(self, loss_fn, rows, gen, ctx):
        if "scale" in changes:
            rows = (rows[0].float() * float(changes["scale"]),)
        return super().step(loss_fn, rows, gen, ctx)


t = time.monotonic()
if steps:
    model, _ = trainloop.fit(Task(cfg), cfg.loop, (torch.from_numpy(flow),), progress=False)
    print(variant, "train wall", round(time.monotonic() - t), "s", flush=True)
else:  # score the run's exported model again
    from baselines.motiongrouping import checkpoint
    model = checkpoint.load(Path(out) / "model.pt")
model.eval()
method = get_method("motiongrouping")
test = read_checked(Path(data), "test", TEST_FIELDS, ntest)
seg, ari, top = None, AriScore(), []
s = float(changes.get("scale", 1.0))
for i in range(0, ntest, 25):
    gt = test["flow"][i:i + 25, 0] * s
    pred = predict(method, model, test["frames"][i:i + 25], gt)
    seg = seg or SegmentationScore(K=pred.masks.shape[1])
    vis = test["visible"][i:i + 25, 0]
    seg.update(pred.masks, pred.visible, test["amodal"][i:i + 25, 0], vis, test["present"][i:i + 25])
    ari.update(pred.visible, vis)
    top.append(pred.visible.max(1).mean())
m = {**seg.compute(), **ari.compute()}
res = {k: round(float(m[k]["all"]), 4) for k in ("visible_iou", "visible_iou_per_image", "visible_mbo")}
res["fg_ari"] = round(float(m["fg_ari"]), 4)
res["mean_max_alpha"] = round(float(sum(top) / len(top)), 4)
print(variant, json.dumps(res), flush=True)
